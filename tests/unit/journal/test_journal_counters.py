"""JournalState's incremental counters against a full scan.

`apply` keeps the pending set and the open obligations up to date record by record (admission reads them on every
message), and `prune` trims them after a compaction. After every step of a random history, built with the real
record constructors, each counter must equal what a plain scan of `messages` / `obligations` gives, and replaying
the journal file as it stands must give the same answers as the state that applied the records one by one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.core.message import new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.journal import JournalState
from crosstalk.journal import records as R
from crosstalk.journal.replay import TERMINAL_TASK_STATES
from crosstalk.journal.retention import RETENTION_SECONDS, ids_in, select_retained
from crosstalk.tasks.table import obligation_record

BIND = R.binding("inst-1", "sess-1", "ep")
ALICE = Sender(SenderClass.VERIFIED, "a" * 16, "alice")
MIDS = ["m0", "m1", "m2"]  # a small pool, so records keep landing on the same messages
PENDING_STATES = (State.SUBMITTED, State.DISPATCHING)

mids = st.sampled_from(MIDS)
replies_to = st.sampled_from([*[None] * 6, *MIDS])  # an in_reply_to joins two messages' retention groups


def scan_pending(state: JournalState) -> set[str]:
    return {mid for mid, e in state.messages.items() if e.state in PENDING_STATES}


def scan_open_obligations(state: JournalState) -> set[str]:
    return {mid for mid, o in state.obligations.items() if o.get("state") not in ("delivered", "closed")}


def scan_pending_asks(state: JournalState) -> int:
    return sum(1 for e in state.messages.values() if e.state in PENDING_STATES and e.message.get("kind") == "ask")


def scan_unresolved(state: JournalState) -> set[str]:
    ids = {mid for mid, e in state.messages.items() if e.unresolved}
    ids |= {tid for tid, t in state.tasks.items() if t.get("state") not in TERMINAL_TASK_STATES}
    ids |= {mid for mid, r in state.routes.items() if r.get("state") == "open"}
    return ids | scan_open_obligations(state)


def answers(state: JournalState) -> dict[str, Any]:
    """Everything the counters say, through the public queries (plus the pending set they are derived from)."""
    return {
        "pending": set(state._pending),
        "pending_count": state.pending_count(),
        "pending_asks": state.pending_asks(),
        "open_asks": state.open_asks(),
        "reply_owed": {mid for mid in [*MIDS, "never-seen"] if state.reply_owed(mid)},
        "unresolved_ids": state.unresolved_ids(),
        "messages": {mid: (e.state, e.resolved) for mid, e in state.messages.items()},
    }


def scanned(state: JournalState) -> dict[str, Any]:
    """The same answers, derived from scratch."""
    pending, open_obligations = scan_pending(state), scan_open_obligations(state)
    return {
        "pending": pending,
        "pending_count": len(pending),
        "pending_asks": scan_pending_asks(state),
        "open_asks": len(open_obligations),
        "reply_owed": open_obligations,
        "unresolved_ids": scan_unresolved(state),
        "messages": {mid: (e.state, e.resolved) for mid, e in state.messages.items()},  # compared replay vs live
    }


class History:
    """A journal file and the state that applied its records one at a time (pruned after each compaction)."""

    def __init__(self) -> None:
        self.log: list[dict[str, Any]] = []  # the journal file as it stands (compactions rewrite it)
        self.state = JournalState()
        self.clock = 1_700_000_000.0  # the records' time: it only moves forward, on `compact`

    def _append(self, *recs: dict[str, Any]) -> None:
        for rec in recs:
            rec["ts"] = self.clock
            self.log.append(rec)
            self.state.apply(rec)

    def receive(self, mid: str, kind: str, reply_to: str | None) -> None:
        m = new_message("bob", "hi", from_="alice", kind=kind, message_id=mid, in_reply_to=reply_to)
        self._append(R.received(m, ALICE, dedupe_key=ALICE.dedupe_key, transport="uds", bind=BIND))

    def dispatch(self, mid: str) -> None:
        self._append(R.dispatch(mid, BIND))

    def outcome(self, mid: str, state: State) -> None:
        self._append(R.outcome(mid, state, None, BIND))

    def resolve(self, mid: str) -> None:
        self._append(R.resolved(mid, "read"))

    def deliver_and_read(self, mid: str) -> None:
        """The common settled path, and what lets a later compaction drop the message."""
        self._append(R.dispatch(mid, BIND), R.outcome(mid, State.ACCEPTED, None, BIND), R.resolved(mid, "read"))

    def obligation(self, mid: str, state: str) -> None:
        self._append(obligation_record(mid, f"task-{mid}", state, None))

    def inform_reply(self, mid: str) -> None:
        self._append(R.inform_reply(mid, f"reply-{mid}", "thanks", "alice"))

    def send(self, mid: str) -> None:
        m = new_message("carol", "out", from_="bob", kind="ask", message_id=f"out-{mid}")
        self._append(R.sent(m, "c" * 16, "accepted", None))

    def compact(self, hours: int) -> None:
        """Time passes, then the agent compacts its journal live: the file keeps what retention selected, the state
        forgets what the file dropped."""
        self.clock += hours * 3600
        self.log = select_retained(self.log, self.state.unresolved_ids(), now=self.clock)
        self.state.prune(ids_in(self.log), self.clock - RETENTION_SECONDS)


steps = st.one_of(
    st.tuples(st.just("receive"), mids, st.sampled_from(["ask", "inform"]), replies_to),
    st.tuples(st.just("dispatch"), mids),
    st.tuples(st.just("outcome"), mids, st.sampled_from(list(State))),
    st.tuples(st.just("resolve"), mids),
    st.tuples(st.just("deliver_and_read"), mids),
    st.tuples(st.just("obligation"), mids, st.sampled_from(["open", "closed", "delivered"])),
    st.tuples(st.just("inform_reply"), mids),
    st.tuples(st.just("send"), mids),
    st.tuples(st.just("compact"), st.sampled_from([0, 1, 25])),  # hours: 25 puts everything so far past retention
)


@settings(max_examples=200, deadline=None)
@given(st.lists(steps, min_size=10, max_size=50))
def test_counters_match_a_scan_and_a_replay_after_every_step(history: list[tuple[Any, ...]]) -> None:
    h = History()
    for name, *args in history:
        getattr(h, name)(*args)
        assert answers(h.state) == scanned(h.state), name
        replayed = JournalState.replay(h.log)  # a restart now: replay must agree with the incremental apply
        assert answers(replayed) == scanned(replayed), name
        assert answers(replayed) == answers(h.state), name
