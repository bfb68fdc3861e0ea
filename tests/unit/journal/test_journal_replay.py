"""Replay: dedupe, message states, resolution, claims, sent records and merged tasks/routes/obligations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.message import Message, new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.journal import Journal, JournalState, MessageEntry
from crosstalk.journal import records as R

BIND = R.binding("inst-1", "sess-1", "ep")
ALICE = Sender(SenderClass.VERIFIED, "a" * 16, "alice")
CI = Sender.unverified("@ci:build")


def msg(text: str = "hi", kind: str = "inform", **kw: Any) -> Message:
    return new_message("bob", text, from_="alice", kind=kind, **kw)


def received(m: Message, sender: Sender = ALICE, **kw: Any) -> dict[str, Any]:
    return R.received(m, sender, dedupe_key=sender.dedupe_key, transport="uds", bind=BIND, **kw)


# ----------------------------------------------------------------- record builders
def test_record_builders_shape() -> None:
    m = msg()
    r = received(m, native=True)
    assert r["type"] == R.RECEIVED and isinstance(r["ts"], float) and r["binding"] == BIND
    assert r["message"] == m.to_dict() and r["sender"] == ALICE.to_dict() and r["native"] is True
    d = R.dispatch(m.message_id, BIND)
    assert d == {"type": "dispatch", "ts": d["ts"], "binding": BIND, "message_id": m.message_id}
    o = R.outcome(m.message_id, State.ACCEPTED, None, BIND, {"via": "x"}, reconciled=True)
    assert o["state"] == "accepted" and o["evidence"] == {"via": "x"} and o["reconciled"] is True
    plain = R.outcome(m.message_id, State.QUEUED, "r", BIND)
    assert "evidence" not in plain and "reconciled" not in plain
    rej = R.rejected(m, CI, "policy:kind", transport="uds")
    assert rej["message_id"] == m.message_id and rej["kind"] == "inform" and rej["text_bytes"] == 2
    assert "binding" not in rej and "message" not in rej  # an audit record never holds the body
    rej2 = R.rejected(None, CI, "frame", transport="uds", message_id="m-x")
    assert rej2["message_id"] == "m-x" and rej2["kind"] is None and rej2["text_bytes"] is None
    assert R.resolved("m", "read")["how"] == "read"
    c = R.claim("claim", "b" * 16, "boss", "worker")
    assert (c["action"], c["owner"], c["owner_name"], c["role"]) == ("claim", "b" * 16, "boss", "worker")
    s = R.sent(m, "c" * 16, "accepted", None)
    assert s["message"]["message_id"] == m.message_id and s["to_agent"] == "c" * 16


# ----------------------------------------------------------------- message lifecycle
def test_received_is_submitted_and_unresolved() -> None:
    m = msg()
    st = JournalState.replay([received(m)])
    e = st.messages[m.message_id]
    assert isinstance(e, MessageEntry)
    assert e.state is State.SUBMITTED and e.unresolved and not e.claimed and not e.resolved
    assert e.message_id == m.message_id and e.message == m.to_dict()
    assert e.sender == ALICE.to_dict() and e.transport == "uds" and e.binding == BIND
    assert e.dedupe_key == ALICE.dedupe_key and e.seq == 1
    assert st.unresolved_ids() == {m.message_id}
    assert st.pending_count() == 1


def test_dispatch_then_outcome() -> None:
    m = msg()
    st = JournalState.replay([received(m), R.dispatch(m.message_id, BIND)])
    e = st.messages[m.message_id]
    assert e.state is State.DISPATCHING and e.claimed and e.unresolved
    assert st.pending_count() == 1
    st.apply(R.outcome(m.message_id, State.ACCEPTED, None, BIND, {"turn": 3}))
    assert e.state is State.ACCEPTED and e.evidence == {"turn": 3} and not e.unresolved
    assert st.unresolved_ids() == set() and st.pending_count() == 0


@pytest.mark.parametrize(
    ("state", "unresolved"),
    [
        (State.ACCEPTED, False),
        (State.QUEUED, False),
        (State.REJECTED, False),
        (State.UNREACHABLE, False),
        (State.UNKNOWN, True),
        (State.RECOVERED, True),
        (State.BOUNCED, False),
    ],
)
def test_outcome_states(state: State, unresolved: bool) -> None:
    m = msg()
    st = JournalState.replay([received(m), R.dispatch(m.message_id, BIND), R.outcome(m.message_id, state, "why", BIND)])
    e = st.messages[m.message_id]
    assert e.state is state and e.reason == "why"
    assert e.unresolved is unresolved
    assert (m.message_id in st.unresolved_ids()) is unresolved


def test_unknown_outcome_state_is_taken_as_unknown() -> None:
    m = msg()
    st = JournalState.replay(
        [received(m), {"type": "outcome", "ts": 1.0, "message_id": m.message_id, "state": "teleported"}]
    )
    assert st.messages[m.message_id].state is State.UNKNOWN


def test_dispatch_only_claims_a_submitted_message() -> None:
    m = msg()
    st = JournalState.replay(
        [received(m), R.outcome(m.message_id, State.REJECTED, "policy", BIND), R.dispatch(m.message_id, BIND)]
    )
    e = st.messages[m.message_id]
    assert e.state is State.REJECTED and not e.claimed


def test_resolved_clears_unresolved() -> None:
    m = msg()
    recs = [received(m), R.dispatch(m.message_id, BIND), R.outcome(m.message_id, State.UNKNOWN, "timeout", BIND)]
    st = JournalState.replay(recs)
    assert st.unresolved_ids() == {m.message_id}
    st.apply(R.resolved(m.message_id, "read"))
    assert st.messages[m.message_id].resolved and not st.messages[m.message_id].unresolved
    assert st.unresolved_ids() == set()


def test_records_for_unknown_messages_are_ignored() -> None:
    st = JournalState.replay(
        [
            R.dispatch("ghost", BIND),
            R.outcome("ghost", State.ACCEPTED, None, BIND),
            R.resolved("ghost", "read"),
            {"type": "dispatch"},
            {"type": "received", "message": {"to": "bob"}},  # no message_id
            {"type": "received"},
        ]
    )
    assert st.messages == {} and st.dedupe == {}
    assert st.records_applied == 6


def test_unknown_record_types_are_counted_and_ignored() -> None:
    m = msg()
    st = JournalState.replay(
        [
            {"type": "from-the-future", "x": 1},
            received(m),
            R.rejected(m, CI, "policy", transport="uds"),
            {"type": R.NUDGE, "peer": "x"},
        ]
    )
    assert list(st.messages) == [m.message_id]
    assert st.records_applied == 4
    assert st.messages[m.message_id].seq == 2


# ----------------------------------------------------------------- dedupe
def test_dedupe_is_per_sender_and_message_id() -> None:
    m1, m2 = msg("one"), msg("two")
    st = JournalState.replay([received(m1, ALICE), received(m2, CI)])
    assert st.lookup_dedupe(ALICE.dedupe_key, m1.message_id) is st.messages[m1.message_id]
    assert st.lookup_dedupe(CI.dedupe_key, m2.message_id) is st.messages[m2.message_id]
    assert st.lookup_dedupe(CI.dedupe_key, m1.message_id) is None  # same id from another sender is new
    assert st.lookup_dedupe(ALICE.dedupe_key, "other") is None
    assert set(st.dedupe) == {(ALICE.dedupe_key, m1.message_id), (CI.dedupe_key, m2.message_id)}


def test_received_without_dedupe_key_is_not_deduped() -> None:
    m = msg()
    st = JournalState.replay([R.received(m, ALICE, dedupe_key=None, transport="a2a", bind=BIND)])
    assert st.dedupe == {} and st.messages[m.message_id].transport == "a2a"


# ----------------------------------------------------------------- claims, sent, tasks, routes, obligations
def test_latest_claim_wins() -> None:
    c1 = R.claim("claim", "b" * 16, "boss", "worker")
    c2 = R.claim("release", None, None, "primary")
    st = JournalState.replay([c1, received(msg()), c2])
    assert st.claim == c2
    assert JournalState.replay([c2, c1]).claim == c1
    assert JournalState().claim is None


def test_sent_records_are_keyed_by_message_id() -> None:
    m = msg()
    s1 = R.sent(m, "c" * 16, "unknown", "timeout")
    s2 = R.sent(m, "c" * 16, "accepted", None)
    st = JournalState.replay([s1, s2, {"type": "sent", "message": {}}])
    assert st.sent == {m.message_id: s2}


def test_tasks_routes_and_obligations_merge() -> None:
    recs = [
        {"type": "task", "ts": 1.0, "task_id": "t1", "state": "working", "context_id": "c1"},
        {"type": "task", "ts": 2.0, "task_id": "t1", "state": "completed"},
        {"type": "task", "ts": 2.0, "task_id": "t2", "state": "submitted"},
        {"type": "task", "ts": 2.0, "task_id": 5, "state": "weird"},  # ignored: no string id
        {"type": "route", "ts": 1.0, "message_id": "ask-1", "state": "open", "to": "carol"},
        {"type": "route", "ts": 3.0, "message_id": "ask-1", "state": "answered"},
        {"type": "route", "ts": 3.0, "message_id": "ask-2", "state": "open"},
        {"type": "obligation", "ts": 1.0, "message_id": "in-1", "state": "open", "from": "dave"},
        {"type": "obligation", "ts": 4.0, "message_id": "in-1", "state": "delivered", "reply_id": "r-1"},
        {"type": "obligation", "ts": 4.0, "message_id": "in-2", "state": "open"},
        {"type": "obligation", "ts": 4.0, "message_id": "in-3", "state": "closed"},
        {"type": "obligation", "ts": 4.0},  # ignored
    ]
    st = JournalState.replay(recs)
    assert st.tasks["t1"] == {"type": "task", "ts": 2.0, "task_id": "t1", "state": "completed", "context_id": "c1"}
    assert set(st.tasks) == {"t1", "t2"}
    assert st.routes["ask-1"]["state"] == "answered" and st.routes["ask-1"]["to"] == "carol"
    assert st.obligations["in-1"] == {
        "type": "obligation",
        "ts": 4.0,
        "message_id": "in-1",
        "state": "delivered",
        "from": "dave",
        "reply_id": "r-1",
    }
    assert st.unresolved_ids() == {"t2", "ask-2", "in-2"}
    assert st.open_asks() == 1


@pytest.mark.parametrize("state", ["completed", "failed", "canceled", "rejected"])
def test_terminal_tasks_are_resolved(state: str) -> None:
    st = JournalState.replay(
        [{"type": "task", "task_id": "t", "state": "working"}, {"type": "task", "task_id": "t", "state": state}]
    )
    assert st.unresolved_ids() == set()


def test_task_without_state_counts_as_unresolved() -> None:
    assert JournalState.replay([{"type": "task", "task_id": "t"}]).unresolved_ids() == {"t"}


def test_open_asks_counts_obligations_not_delivered_or_closed() -> None:
    st = JournalState.replay(
        [
            {"type": "obligation", "message_id": f"m{i}", "state": s}
            for i, s in enumerate(["open", "open", "delivered", "closed", "expired"])
        ]
    )
    assert st.open_asks() == 3


# ----------------------------------------------------------------- replay equals live
def _scenario() -> list[dict[str, Any]]:
    a, b, c = msg("a"), msg("b", kind="ask", deadline_seconds=30), msg("c")
    return [
        R.claim("claim", "b" * 16, "boss", "worker"),
        received(a),
        R.dispatch(a.message_id, BIND),
        R.outcome(a.message_id, State.ACCEPTED, None, BIND),
        received(b, CI),
        {"type": "obligation", "message_id": b.message_id, "state": "open"},
        R.dispatch(b.message_id, BIND),
        R.outcome(b.message_id, State.UNKNOWN, "harness timeout", BIND),
        received(c),
        R.rejected(None, CI, "auth", transport="uds"),
    ]


def _snapshot(st: JournalState) -> dict[str, Any]:
    return {
        "messages": {k: (e.state, e.claimed, e.resolved, e.seq, e.reason) for k, e in st.messages.items()},
        "dedupe": dict(st.dedupe),
        "tasks": st.tasks,
        "routes": st.routes,
        "obligations": st.obligations,
        "claim": st.claim,
        "sent": st.sent,
        "unresolved": st.unresolved_ids(),
        "n": st.records_applied,
    }


def test_live_apply_equals_replay() -> None:
    recs = _scenario()
    live = JournalState()
    for r in recs:
        live.apply(r)
    assert _snapshot(live) == _snapshot(JournalState.replay(recs))


def test_replay_from_a_reopened_journal_equals_live(tmp_path: Path) -> None:
    recs = _scenario()
    path = tmp_path / "a.jsonl"
    j, _ = Journal.open(path)
    live = JournalState()
    try:
        for r in recs:
            j.append(r)
            live.apply(r)
    finally:
        j.close()
    j2, result = Journal.open(path)
    j2.close()
    replayed = JournalState.replay(result.records)
    assert _snapshot(replayed) == _snapshot(live)
    assert replayed.pending_count() == 1  # c is still submitted
    ids = replayed.unresolved_ids()
    assert len(ids) == 2  # b (unknown, with its open obligation) and c (submitted)
