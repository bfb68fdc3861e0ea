"""JournalTail: a journal written by the real journal writer, followed by what each append adds; and the
mailbox rule it counts unread entries by, kept equal to receive_message's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crosstalk.core.message import new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.journal import Journal
from crosstalk.journal import records as R
from crosstalk.journal.codec import encode
from crosstalk.tasks.table import obligation_record
from crosstalk.watch.journals import NEEDS_ATTENTION, JournalTail

BIND = R.binding("inst-1", "sess-1", "ep")
ALICE = Sender(SenderClass.VERIFIED, "a" * 16, "alice")


def _received(text: str, kind: str = "inform") -> tuple[str, dict[str, object]]:
    m = new_message("bob", text, from_="alice", kind=kind)
    return m.message_id, R.received(m, ALICE, dedupe_key=ALICE.dedupe_key, transport="uds", bind=BIND)


def test_growth_is_applied_and_an_unchanged_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    tail = JournalTail(path)
    assert tail.refresh() is False and tail.unread() == 0  # no journal yet
    journal, _ = Journal.open(path)
    try:
        mid, rec = _received("hello")
        journal.append(rec)
        assert tail.refresh() is True
        assert tail.state.messages[mid].state is State.SUBMITTED and tail.unread() == 1
        assert tail.refresh() is False
        journal.append(R.outcome(mid, State.ACCEPTED, None, BIND))
        assert tail.refresh() is True
        entry = tail.state.messages[mid]
        assert entry.state is State.ACCEPTED and entry.outcome_ts is not None and tail.unread() == 0
    finally:
        journal.close()


def test_a_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    mid, rec = _received("torn")
    line = encode(rec)
    path.write_bytes(line[:10])
    tail = JournalTail(path)
    assert tail.refresh() is False and tail.state.messages == {}
    with open(path, "ab") as f:
        f.write(line[10:])
    assert tail.refresh() is True and mid in tail.state.messages


def test_a_rewrite_into_a_new_inode_is_read_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = Journal.open(path)
    try:
        first, rec1 = _received("one")
        second, rec2 = _received("two")
        journal.append(rec1)
        journal.append(rec2)
        tail = JournalTail(path)
        tail.refresh()
        assert set(tail.state.messages) == {first, second}
        inode = os.stat(path).st_ino
        journal.rewrite([rec2])  # what retention does: temp file, rename
        assert os.stat(path).st_ino != inode
        assert tail.refresh() is True and set(tail.state.messages) == {second}
    finally:
        journal.close()
    path.unlink()
    assert tail.refresh() is True and tail.state.messages == {}  # the journal is gone: so is what it said


def test_rejections_asks_owed_and_asks_waiting_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = Journal.open(path)
    try:
        ask, rec = _received("question?", kind="ask")
        journal.append(rec)
        journal.append(R.outcome(ask, State.ACCEPTED, None, BIND))
        journal.append(obligation_record(ask, "t-1", "open", None))
        journal.append(R.rejected(None, Sender.unverified("@ci:x"), "policy:acl", transport="uds", message_id="m-1"))
        journal.append({"type": R.ROUTE, "ts": 1.0, "message_id": "m-2", "state": "open"})
        tail = JournalTail(path)
        tail.refresh()
        assert (tail.open_asks(), tail.unread(), tail.asks_waiting()) == (1, 1, 1)  # delivered, but owed a reply
        assert [r["reason"] for r in tail.rejected] == ["policy:acl"]
        journal.append(obligation_record(ask, "t-1", "delivered", None))
        journal.append({"type": R.ROUTE, "ts": 2.0, "message_id": "m-2", "state": "answered"})
        tail.refresh()
        assert (tail.open_asks(), tail.unread(), tail.asks_waiting()) == (0, 0, 0)
    finally:
        journal.close()


def test_damaged_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    mid, rec = _received("fine")
    path.write_bytes(b"not json\n[1, 2]\n" + encode(rec))
    tail = JournalTail(path)
    assert tail.refresh() is True and list(tail.state.messages) == [mid]


def test_unread_is_what_receive_message_lists_by_default() -> None:
    from crosstalk.shim.mailbox import NEEDS_ATTENTION as MAILBOX

    assert {s.value for s in NEEDS_ATTENTION} == set(MAILBOX)


def test_a_journal_past_the_tail_bound_is_read_from_its_last_bytes_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`crosstalk watch --once` on a huge journal (one its agent has not compacted) reads a bounded tail, starting at a
    line boundary, not the whole file; growth after it is followed as before."""
    import crosstalk.watch.journals as journals

    monkeypatch.setattr(journals, "MAX_TAIL_BYTES", 64 * 1024)
    path = tmp_path / "j.jsonl"
    mids, lines = [], []
    for i in range(600):
        mid, rec = _received(f"message {i}")
        mids.append(mid)
        lines += [encode(rec), encode(R.outcome(mid, State.ACCEPTED, None, BIND))]
    data = b"".join(lines)
    assert len(data) > 4 * 64 * 1024
    path.write_bytes(data)
    tail = JournalTail(path)
    assert tail.refresh() is True
    assert tail.state.records_applied <= 64 * 1024 // min(len(x) for x in lines) + 1  # not the whole file
    assert mids[-1] in tail.state.messages and mids[0] not in tail.state.messages
    assert tail.state.messages[mids[-1]].state is State.ACCEPTED and tail.unread() == 0
    mid, rec = _received("after")
    with open(path, "ab") as f:
        f.write(encode(rec))
    assert tail.refresh() is True and mid in tail.state.messages and tail.unread() == 1


def test_checkpoint_records_are_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    mid, rec = _received("after a compaction")
    path.write_bytes(encode(R.checkpoint(["old", "k", "accepted", None, 1.0])) + encode(rec))
    tail = JournalTail(path)
    assert tail.refresh() is True
    assert list(tail.state.messages) == [mid] and tail.unread() == 1
