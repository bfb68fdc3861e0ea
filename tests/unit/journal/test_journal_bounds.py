"""The agent's state stays bounded however many messages it handled: settled messages beyond the newest
`max_settled` keep only their dedupe answer (the dedupe window), compaction writes that window as checkpoint records
and drops their records, and a replay of the compacted file answers the same retries the same way."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.message import Message, new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.journal import Journal, JournalState
from crosstalk.journal import records as R
from crosstalk.journal.codec import MAX_RECORD_BYTES, encode, read_journal
from crosstalk.journal.retention import Plan, compact_records
from crosstalk.journal.window import DedupeWindow, checkpoint_chunks, fresh_entries

BIND = R.binding("inst-1", "sess-1", None)
ALICE = Sender(SenderClass.VERIFIED, "a" * 16, "alice")
BOUND = 40


def msg(i: int, kind: str = "inform") -> Message:
    return new_message("bob", f"message {i}", from_="alice", kind=kind)


def lifecycle(m: Message, state: State = State.ACCEPTED) -> list[dict[str, Any]]:
    return [
        R.received(m, ALICE, dedupe_key=ALICE.dedupe_key, transport="uds", bind=BIND),
        R.dispatch(m.message_id, BIND),
        R.outcome(m.message_id, state, None, BIND),
    ]


def test_settled_messages_past_the_bound_keep_only_their_dedupe_answer() -> None:
    st_ = JournalState(max_settled=BOUND)
    open_ones = [msg(i) for i in range(3)]
    for m in open_ones:  # unknown, unresolved: the session still has to see them, so they stay whole
        for rec in lifecycle(m, State.UNKNOWN):
            st_.apply(rec)
    settled = [msg(i) for i in range(20 * BOUND)]
    for m in settled:
        for rec in lifecycle(m):
            st_.apply(rec)

    assert len(st_.messages) <= BOUND + 3 + max(16, BOUND // 8)  # not 20 × BOUND
    assert len(st_.dedupe) == len(st_.messages)
    assert all(m.message_id in st_.messages for m in open_ones)
    assert settled[-1].message_id in st_.messages  # the newest settled ones stay whole
    gone = settled[0]
    assert gone.message_id not in st_.messages and st_.knows(gone.message_id)
    answer = st_.lookup_dedupe(ALICE.dedupe_key, gone.message_id)
    assert answer is not None and answer.state is State.ACCEPTED and answer.message_id == gone.message_id
    assert st_.lookup_dedupe("agent:" + "c" * 16, gone.message_id) is None  # another sender's id is not a retry
    assert st_.unresolved_ids() == {m.message_id for m in open_ones}


def test_what_is_still_owed_is_never_let_go() -> None:
    st_ = JournalState(max_settled=BOUND)
    ask = msg(0, "ask")
    for rec in lifecycle(ask):
        st_.apply(rec)
    st_.apply({"type": R.OBLIGATION, "ts": time.time(), "message_id": ask.message_id, "state": "open"})
    held = msg(1)
    for rec in lifecycle(held, State.HELD):
        st_.apply(rec)
    for i in range(10 * BOUND):
        for rec in lifecycle(msg(i + 2)):
            st_.apply(rec)
    assert ask.message_id in st_.messages and st_.reply_owed(ask.message_id)
    assert held.message_id in st_.messages


def test_other_tables_are_bounded_too() -> None:
    st_ = JournalState(max_settled=BOUND)
    now = time.time()
    for i in range(10 * BOUND):
        st_.apply({"type": R.TASK, "ts": now, "task_id": f"t{i}", "state": "completed"})
        st_.apply({"type": R.ROUTE, "ts": now, "message_id": f"r{i}", "state": "closed"})
        st_.apply({"type": R.OBLIGATION, "ts": now, "message_id": f"o{i}", "state": "closed"})
        st_.apply({"type": R.HELD_SEND, "ts": now, "message_id": f"h{i}", "state": "accepted", "notified": True})
        st_.apply(R.sent(msg(i), None, "accepted", None))
    st_.apply({"type": R.TASK, "ts": now, "task_id": "open", "state": "working"})
    limit = BOUND + max(16, BOUND // 8) + 1
    for table in (st_.tasks, st_.routes, st_.obligations, st_.held_sends, st_.sent):
        assert len(table) <= limit
    assert "open" in st_.tasks and "t0" in st_.gone_tasks


def test_compaction_collapses_settled_messages_into_a_checkpoint_and_replay_answers_the_same(tmp_path: Path) -> None:
    path = tmp_path / "bob.jsonl"
    journal, _ = Journal.open(path, tmp_path / "bob.lock")
    messages = [msg(i) for i in range(20 * BOUND)]
    try:
        journal.append_many([rec for m in messages for rec in lifecycle(m)])
        read = read_journal(path)
        live = JournalState.replay(read.records, max_settled=BOUND)
        kept = compact_records(read.records, Plan.of(live))
        journal.rewrite(kept)
    finally:
        journal.close()

    records = read_journal(path).records
    assert len(records) < 3 * (BOUND + max(16, BOUND // 8)) + 5  # the newest settled ones and the checkpoint
    assert records[0]["type"] == R.CHECKPOINT
    again = JournalState.replay(records, max_settled=BOUND)
    assert set(again.messages) <= set(live.messages) and messages[-1].message_id in again.messages
    for m in messages:  # every retry is answered as the duplicate it is, before and after the restart
        first = live.lookup_dedupe(ALICE.dedupe_key, m.message_id)
        second = again.lookup_dedupe(ALICE.dedupe_key, m.message_id)
        assert first is not None and second is not None and first.state is second.state is State.ACCEPTED

    # A second compaction replaces the checkpoint rather than stacking another one.
    twice = compact_records(records, Plan.of(again))
    assert sum(1 for r in twice if r["type"] == R.CHECKPOINT) == sum(1 for r in records if r["type"] == R.CHECKPOINT)


def test_the_dedupe_window_is_bounded_by_count_and_by_retention() -> None:
    w = DedupeWindow(limit=5)
    for i in range(12):
        w.add(f"m{i}", "k", "accepted", None, float(i))
    assert len(w) == 5 and "m6" not in w and "m7" in w and "m11" in w
    w.expire(9.0)
    assert w.ids() == {"m9", "m10", "m11"}


def test_checkpoint_records_stay_under_the_record_cap() -> None:
    entries = [[f"m{i:06d}-" + "x" * 30, "external:" + "é" * 200, "accepted", "r" * 50, 1.5] for i in range(6000)]
    chunks = checkpoint_chunks([value for entry in entries for value in entry])
    assert len(chunks) > 1 and sum(len(c) for c in chunks) == 5 * len(entries)
    for chunk in chunks:
        assert len(encode(R.checkpoint(chunk))) < MAX_RECORD_BYTES
    w = DedupeWindow(limit=10_000)
    assert sum(w.load(chunk) for chunk in chunks) == len(entries)
    assert w.snapshot() == entries


def test_a_malformed_checkpoint_is_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "bob.jsonl"
    good = R.checkpoint(["m1", "k", "accepted", None, 1.0, "m2", 3, "accepted", None, 1.0, "torn"])
    path.write_bytes(encode(good) + b'{"type":"checkpoint","ts":1.0,"entries":{"m":1}}\n')
    read = read_journal(path)
    assert read.bad_lines == 1 and len(read.records) == 1
    st_ = JournalState.replay(read.records)
    assert st_.window.ids() == {"m1"}


@given(st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=5), lambda c: st.lists(c, max_size=6)))
def test_any_checkpoint_entries_load_without_raising(entries: Any) -> None:
    w = DedupeWindow(limit=10)
    taken = w.load(entries)
    assert taken <= (len(entries) // 5 if isinstance(entries, list) else 0)
    assert len(w) <= 10


@given(
    st.lists(
        st.tuples(st.sampled_from(["accepted", "queued", "unknown", "held", "unreachable", "none"]), st.booleans()),
        min_size=1,
        max_size=120,
    )
)
def test_a_bounded_state_answers_every_retry_as_an_unbounded_one_does(steps: list[tuple[str, bool]]) -> None:
    """Whatever the mix of outcomes (none: still dispatching) and resolutions, a state bounded to a few settled
    messages answers each retry with the same state as one that keeps everything, and keeps every message the
    session still has to see."""
    small, full = JournalState(max_settled=4), JournalState(max_settled=10**9)
    mids = []
    for i, (state, resolve) in enumerate(steps):
        m = msg(i)
        mids.append(m.message_id)
        recs = lifecycle(m, State(state)) if state != "none" else lifecycle(m)[:2]
        if resolve:
            recs.append(R.resolved(m.message_id, "read"))
        for rec in recs:
            small.apply(rec)
            full.apply(rec)
    for mid in mids:
        a, b = small.lookup_dedupe(ALICE.dedupe_key, mid), full.lookup_dedupe(ALICE.dedupe_key, mid)
        assert a is not None and b is not None and (a.state, a.reason) == (b.state, b.reason)
        e = full.messages[mid]
        if e.state in (State.DISPATCHING, State.HELD) or (
            not e.resolved and e.state in (State.UNKNOWN, State.UNREACHABLE)
        ):
            assert mid in small.messages
    assert small.unresolved_ids() == full.unresolved_ids() and small.pending_count() == full.pending_count()


def test_a_compaction_takes_the_window_flat_and_only_its_fresh_entries() -> None:
    w = DedupeWindow(limit=10)
    for i in range(4):
        w.add(f"m{i}", None if i % 2 else "agent:a", "accepted", "r" if i == 3 else None, float(i))
    flat = w.flat()
    assert flat == [value for entry in w.snapshot() for value in entry]  # five values an entry, one list
    assert fresh_entries(flat, 0.0) is flat  # nothing to drop: no copy
    assert fresh_entries(flat, 2.0) == ["m2", "agent:a", "accepted", None, 2.0, "m3", None, "accepted", "r", 3.0]
    again = DedupeWindow(limit=10)
    assert sum(again.load(chunk) for chunk in checkpoint_chunks(flat)) == 4 and again.snapshot() == w.snapshot()
