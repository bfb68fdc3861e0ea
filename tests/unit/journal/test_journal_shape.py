"""Valid JSON with wrong types is outside damage: skipped and counted by the reader, never a crash in replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crosstalk.journal import JournalState
from crosstalk.journal.codec import read_journal
from crosstalk.journal.shape import problem

MID = "01a2b3c4-0000-7000-8000-000000000001"
GOOD = {"type": "received", "ts": 1.0, "message": {"message_id": MID, "parts": [{"text": "hi"}]}, "sender": {}}
BAD = [
    {"type": "received", "ts": None, "message": {"message_id": MID}},
    {"type": "received", "ts": 1.0, "message": "not an object"},
    {"type": "outcome", "ts": 2.0, "message_id": MID, "state": "accepted", "evidence": "oops"},
    {"type": "task", "ts": 3.0, "task_id": "t1", "state": "exploded"},
    {"type": "task", "ts": 3.0, "task_id": 7, "state": "working"},
    {"type": "task", "ts": 3.0, "task_id": "t1", "deadline_at": "soon"},
    {"type": "claim", "ts": 4.0, "action": ["claimed"], "role": "worker"},
    {"type": "dispatch", "ts": "yesterday", "message_id": MID},
]


@pytest.mark.parametrize("rec", BAD)
def test_each_wrong_type_is_named(rec: dict) -> None:
    assert problem(rec) is not None
    assert problem(GOOD) is None


def test_a_journal_with_wrong_types_replays_what_is_sound(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [GOOD, *BAD]))
    read = read_journal(path)
    assert read.records == [GOOD] and read.bad_lines == len(BAD)
    state = JournalState.replay(read.records)
    assert MID in state.messages and state.pending_count() == 1


@pytest.mark.parametrize("shape", ["directory", "symlink", "fifo"])
def test_a_journal_that_is_not_a_regular_file_is_a_clear_error(tmp_path: Path, shape: str) -> None:
    import os

    from crosstalk.journal import JournalError

    path = tmp_path / "j.jsonl"
    if shape == "directory":
        path.mkdir()
    elif shape == "symlink":
        (tmp_path / "elsewhere").write_text(json.dumps(GOOD) + "\n")
        path.symlink_to(tmp_path / "elsewhere")
    else:
        os.mkfifo(path)
    with pytest.raises(JournalError, match=r"j\.jsonl .*move it away"):
        read_journal(path)


@pytest.mark.parametrize("shape", ["symlink", "fifo"])
def test_a_journal_lock_that_is_not_a_regular_file_is_a_clear_error_not_a_hang(tmp_path: Path, shape: str) -> None:
    """A FIFO planted where the writer's lock file goes was taken as the lock, and a symlink there was followed (a
    dangling one created its target outside the state root): both are refused with the path and what it is."""
    import os

    from crosstalk.journal import Journal, JournalError

    lock = tmp_path / "j.lock"
    if shape == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(JournalError, match=r"j\.lock is (a FIFO|a symlink).*move it away"):
        Journal.open(tmp_path / "j.jsonl")
    assert not (tmp_path / "elsewhere").exists()
