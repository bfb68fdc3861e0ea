"""The journal writer: lock, replay on open, torn tails, group commit, failure truncation, rewrite and close."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from crosstalk.journal import Journal, JournalError, JournalLocked, JournalWriteError
from crosstalk.journal.codec import MAX_RECORD_BYTES, encode, read_journal
from crosstalk.journal.writer import FsOps

WAIT_S = 10.0


def rec(i: int, **extra: Any) -> dict[str, Any]:
    return {"type": "test", "i": i, **extra}


class ScriptedFs:
    """An FsOps whose calls are counted and whose next calls can be scripted to fail, write short, or block."""

    def __init__(self) -> None:
        self.write_plan: list[str] = []  # "eio" raises, "half" writes half the view and returns
        self.fsync_plan: list[str] = []
        self.truncate_plan: list[str] = []
        self.writes = 0
        self.fsyncs = 0
        self.truncates: list[int] = []
        self.block_next_write: threading.Event | None = None
        self.write_entered = threading.Event()

    def ops(self) -> FsOps:
        return FsOps(write=self.write, fsync=self.fsync, ftruncate=self.ftruncate)

    def write(self, fd: int, view: memoryview) -> int:
        self.writes += 1
        self.write_entered.set()
        gate, self.block_next_write = self.block_next_write, None
        if gate is not None:
            assert gate.wait(WAIT_S), "test never released the blocked write"
        action = self.write_plan.pop(0) if self.write_plan else "ok"
        if action == "eio":
            raise OSError(errno.EIO, "injected write failure")
        if action == "half":
            return os.write(fd, view[: max(1, len(view) // 2)])
        return os.write(fd, view)

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        action = self.fsync_plan.pop(0) if self.fsync_plan else "ok"
        if action == "eio":
            raise OSError(errno.EIO, "injected fsync failure")
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self.truncates.append(size)
        action = self.truncate_plan.pop(0) if self.truncate_plan else "ok"
        if action == "eio":
            raise OSError(errno.EIO, "injected truncate failure")
        os.ftruncate(fd, size)


@pytest.fixture
def jpath(tmp_path: Path) -> Path:
    return tmp_path / "j" / "agent.jsonl"


@pytest.fixture
def opened() -> Iterator[list[Journal]]:
    """Collects journals a test opens and closes them all at the end, whatever happened."""
    journals: list[Journal] = []
    yield journals
    for j in journals:
        j.close()


def open_j(path: Path, opened: list[Journal], fs: FsOps | None = None) -> tuple[Journal, Any]:
    j, result = Journal.open(path, fs=fs)
    opened.append(j)
    return j, result


def file_bytes(path: Path) -> bytes:
    return path.read_bytes()


# ----------------------------------------------------------------- append and replay
def test_append_then_reopen_replays_the_same_records(jpath: Path, opened: list[Journal]) -> None:
    j, result = open_j(jpath, opened)
    assert result.records == [] and result.good_size == 0 and j.size == 0
    records = [rec(i, text="héllo\n😀", nested={"a": [1, 2]}) for i in range(20)]
    offsets = [j.append(r) for r in records]
    assert offsets == sorted(offsets) and offsets[-1] == j.size == jpath.stat().st_size
    j.append_many([rec(100), rec(101)])
    j.close()

    j2, result2 = open_j(jpath, opened)
    assert result2.records == [*records, rec(100), rec(101)]
    assert result2.bad_lines == 0 and result2.torn_tail_bytes == 0
    assert j2.size == result2.good_size == jpath.stat().st_size


def test_append_returns_the_end_offset(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    first = j.append(rec(1))
    assert first == len(encode(rec(1)))
    assert j.append(rec(2)) == first + len(encode(rec(2)))


def test_open_creates_private_dir_and_files(tmp_path: Path, opened: list[Journal]) -> None:
    path = tmp_path / "deep" / "er" / "a.jsonl"
    j, _ = open_j(path, opened)
    j.append(rec(1))
    assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
    assert j.lock_path == path.with_suffix(".lock") and j.lock_path.exists()
    assert (j.lock_path.stat().st_mode & 0o777) == 0o600


def test_explicit_lock_path(tmp_path: Path, opened: list[Journal]) -> None:
    lock = tmp_path / "locks" / "x.lock"
    lock.parent.mkdir()
    j, _ = Journal.open(tmp_path / "a.jsonl", lock)
    opened.append(j)
    assert j.lock_path == lock and lock.exists()
    with pytest.raises(JournalLocked):
        Journal.open(tmp_path / "other.jsonl", lock)


# ----------------------------------------------------------------- the writer lock
def test_second_open_in_the_same_process_is_locked(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append(rec(1))
    with pytest.raises(JournalLocked) as info:
        Journal.open(jpath)
    assert str(jpath) in str(info.value)
    assert j.append(rec(2)) > 0  # the holder is unaffected
    assert len(read_journal(jpath).records) == 2


_CHILD = """
import sys
from crosstalk.journal import Journal, JournalLocked
try:
    j, result = Journal.open(sys.argv[1])
except JournalLocked:
    print("locked")
    sys.exit(3)
print("opened", len(result.records))
j.close()
"""


def run_child(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=60)


def test_open_in_another_process_is_locked_then_free_after_close(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append(rec(1))
    child = run_child(jpath)
    assert child.returncode == 3 and child.stdout.strip() == "locked", child.stderr
    j.close()
    child = run_child(jpath)
    assert child.returncode == 0 and child.stdout.strip() == "opened 1", child.stderr


def test_close_releases_the_lock_and_keeps_the_lock_file(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append(rec(1))
    j.close()
    assert j.lock_path.exists()
    j2, result = open_j(jpath, opened)
    assert result.records == [rec(1)]
    assert j2.lock_path == j.lock_path


def test_close_is_idempotent_and_later_appends_fail(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append(rec(1))
    j.close()
    j.close()
    with pytest.raises(JournalError):
        j.append(rec(2))
    with pytest.raises(JournalError):
        j.submit([rec(3)])
    assert read_journal(jpath).records == [rec(1)]


def test_context_manager_closes(jpath: Path) -> None:
    j, _ = Journal.open(jpath)
    with j:
        j.append(rec(1))
    j2, result = Journal.open(jpath)
    with j2:
        assert result.records == [rec(1)]


def test_close_drains_queued_appends(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    gate = threading.Event()
    fs.block_next_write = gate
    futures = [j.submit([rec(i)]) for i in range(5)]
    assert fs.write_entered.wait(WAIT_S)
    closer = threading.Thread(target=j.close)
    closer.start()
    gate.set()
    closer.join(WAIT_S)
    assert not closer.is_alive()
    assert all(f.result(timeout=WAIT_S) > 0 for f in futures)
    assert read_journal(jpath).records == [rec(i) for i in range(5)]


# ----------------------------------------------------------------- torn tails and damage
def test_torn_tail_is_dropped_and_truncated_on_open(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append_many([rec(1), rec(2)])
    j.close()
    good = jpath.stat().st_size
    torn = encode(rec(3))[:-5]  # a crash mid-append: no newline at the end
    with open(jpath, "ab") as f:
        f.write(torn)

    assert read_journal(jpath).torn_tail_bytes == len(torn)  # replay alone drops it
    assert read_journal(jpath).records == [rec(1), rec(2)]

    j2, result = open_j(jpath, opened)
    assert result.records == [rec(1), rec(2)]
    assert result.torn_tail_bytes == len(torn) and result.good_size == good
    assert jpath.stat().st_size == good  # open cut it off
    assert j2.size == good
    j2.append(rec(4))
    j2.close()

    assert file_bytes(jpath) == b"".join(encode(r) for r in [rec(1), rec(2), rec(4)])
    result = read_journal(jpath)
    assert result.records == [rec(1), rec(2), rec(4)]
    assert result.torn_tail_bytes == 0 and result.bad_lines == 0


def test_torn_only_line(jpath: Path, opened: list[Journal]) -> None:
    jpath.parent.mkdir(parents=True)
    jpath.write_bytes(b'{"type":"te')
    j, result = open_j(jpath, opened)
    assert result.records == [] and result.torn_tail_bytes == 11 and result.good_size == 0
    assert jpath.stat().st_size == 0
    j.append(rec(1))
    assert read_journal(jpath).records == [rec(1)]


def test_bad_middle_line_is_skipped_and_counted(jpath: Path, opened: list[Journal]) -> None:
    jpath.parent.mkdir(parents=True)
    jpath.write_bytes(
        encode(rec(1))
        + b"this is not json\n"
        + b'["a list"]\n'
        + b'{"no_type": 1}\n'
        + b'{"type": 7}\n'
        + b"\n"
        + encode(rec(2))
    )
    size = jpath.stat().st_size
    j, result = open_j(jpath, opened)
    assert result.records == [rec(1), rec(2)]
    assert result.bad_lines == 4 and result.torn_tail_bytes == 0
    assert jpath.stat().st_size == size  # damage in the middle is left alone, only skipped
    j.append(rec(3))
    assert read_journal(jpath).records == [rec(1), rec(2), rec(3)]


# ----------------------------------------------------------------- group commit
class SlowFsync:
    """Real file calls, with an fsync slow enough that concurrent appends pile up behind it."""

    def __init__(self, delay_s: float = 0.003) -> None:
        self.delay_s = delay_s
        self.fsyncs = 0

    def ops(self) -> FsOps:
        def fsync(fd: int) -> None:
            self.fsyncs += 1
            time.sleep(self.delay_s)
            os.fsync(fd)

        return FsOps(fsync=fsync)


def test_group_commit_with_32_threads(jpath: Path, opened: list[Journal]) -> None:
    slow = SlowFsync()
    j, _ = open_j(jpath, opened, slow.ops())
    n_threads, per_thread = 32, 10
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []
    offsets: list[int] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        try:
            barrier.wait(WAIT_S)
            for k in range(per_thread):
                off = j.append(rec(t * 1000 + k, thread=t))
                with lock:
                    offsets.append(off)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []

    total = n_threads * per_thread
    result = read_journal(jpath)
    ids = [r["i"] for r in result.records]
    assert sorted(ids) == sorted(t * 1000 + k for t in range(n_threads) for k in range(per_thread))
    assert len(set(ids)) == total  # each exactly once
    assert result.bad_lines == 0 and result.torn_tail_bytes == 0
    # each thread's own records are in its order
    for t in range(n_threads):
        mine = [r["i"] for r in result.records if r["thread"] == t]
        assert mine == sorted(mine)
    assert j.batches < total, "no batching happened"
    assert slow.fsyncs == j.batches  # one fsync per batch
    assert max(offsets) == j.size == jpath.stat().st_size


def test_appends_queued_behind_a_running_batch_share_the_next(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    gate = threading.Event()
    fs.block_next_write = gate
    first = j.submit([rec(0)])
    assert fs.write_entered.wait(WAIT_S)
    queued = [j.submit([rec(i)]) for i in range(1, 6)]
    gate.set()
    assert first.result(timeout=WAIT_S) == len(encode(rec(0)))
    ends = {f.result(timeout=WAIT_S) for f in queued}
    assert ends == {j.size}  # all five resolved together at the end of one batch
    assert j.batches == 2 and fs.fsyncs == 2


def test_append_async_under_asyncio(jpath: Path, opened: list[Journal]) -> None:
    slow = SlowFsync(0.001)
    j, _ = open_j(jpath, opened, slow.ops())

    async def main() -> list[int]:
        singles = [j.append_async(rec(i)) for i in range(200)]
        pairs = [j.append_many_async([rec(1000 + i), rec(2000 + i)]) for i in range(50)]
        return await asyncio.wait_for(asyncio.gather(*singles, *pairs), WAIT_S * 3)

    offsets = asyncio.run(main())
    assert len(offsets) == 250 and all(o > 0 for o in offsets)
    result = read_journal(jpath)
    ids = [r["i"] for r in result.records]
    assert sorted(ids) == sorted([*range(200), *range(1000, 1050), *range(2000, 2050)])
    for i in range(50):  # a multi-record append stays contiguous
        k = ids.index(1000 + i)
        assert ids[k + 1] == 2000 + i
    assert j.batches < 250


def test_append_async_surfaces_write_errors(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    fs.write_plan = ["eio"]

    async def main() -> None:
        with pytest.raises(JournalWriteError):
            await j.append_async(rec(1))
        assert await j.append_async(rec(2)) == len(encode(rec(2)))

    asyncio.run(main())
    assert read_journal(jpath).records == [rec(2)]


# ----------------------------------------------------------------- durability flag
def test_non_durable_appends_do_not_fsync(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    for i in range(5):
        j.append(rec(i), durable=False)
    assert fs.fsyncs == 0 and fs.writes == 5
    j.append(rec(5))
    assert fs.fsyncs == 1
    j.append_many([rec(6), rec(7)], durable=False)
    assert fs.fsyncs == 1
    assert [r["i"] for r in read_journal(jpath).records] == list(range(8))


def test_a_batch_with_any_durable_record_fsyncs_once(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    gate = threading.Event()
    fs.block_next_write = gate
    head = j.submit([rec(0)], durable=False)
    assert fs.write_entered.wait(WAIT_S)
    mixed = [j.submit([rec(1)], durable=False), j.submit([rec(2)]), j.submit([rec(3)], durable=False)]
    gate.set()
    head.result(timeout=WAIT_S)
    for f in mixed:
        f.result(timeout=WAIT_S)
    assert j.batches == 2 and fs.fsyncs == 1  # the all-non-durable head batch skipped it


# ----------------------------------------------------------------- failed appends
def _check_clean_after_failure(jpath: Path, j: Journal, before: bytes, expected: list[dict[str, Any]]) -> None:
    assert file_bytes(jpath) == before
    assert j.size == len(before)
    assert j.append(rec(99)) == len(before) + len(encode(rec(99)))
    result = read_journal(jpath)
    assert result.records == [*expected, rec(99)]
    assert result.bad_lines == 0 and result.torn_tail_bytes == 0


@pytest.mark.parametrize(
    ("write_plan", "fsync_plan"),
    [
        (["eio"], []),  # the write fails outright
        (["half", "eio"], []),  # a short write, then the rest fails: half a line is on disk
        (["half", "half", "eio"], []),
        ([], ["eio"]),  # every byte written, fsync fails
        (["half"], ["eio"]),
    ],
    ids=["write-eio", "partial-then-eio", "two-partials-then-eio", "fsync-eio", "partial-then-fsync-eio"],
)
def test_failed_append_truncates_back(
    jpath: Path, opened: list[Journal], write_plan: list[str], fsync_plan: list[str]
) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    j.append_many([rec(1), rec(2)])
    before = file_bytes(jpath)
    fs.write_plan, fs.fsync_plan = list(write_plan), list(fsync_plan)
    big = rec(3, pad="x" * 5000)
    with pytest.raises(JournalWriteError) as info:
        j.append(big)
    assert "injected" in str(info.value) and str(jpath) in str(info.value)
    assert fs.truncates == [len(before)]
    assert fs.write_plan == [] and fs.fsync_plan == []
    _check_clean_after_failure(jpath, j, before, [rec(1), rec(2)])
    j.close()
    _, result = open_j(jpath, opened)
    assert result.records == [rec(1), rec(2), rec(99)] and result.torn_tail_bytes == 0


def test_every_append_in_a_failed_batch_fails(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    gate = threading.Event()
    fs.block_next_write = gate
    head = j.submit([rec(0)])
    assert fs.write_entered.wait(WAIT_S)
    fs.write_plan = ["ok", "half", "eio"]  # the head batch succeeds, the next one breaks mid-way
    victims = [j.submit([rec(i, pad="y" * 100)]) for i in range(1, 4)]
    gate.set()
    assert head.result(timeout=WAIT_S) == len(encode(rec(0)))
    for f in victims:
        with pytest.raises(JournalWriteError):
            f.result(timeout=WAIT_S)
    _check_clean_after_failure(jpath, j, encode(rec(0)), [rec(0)])


def test_failed_truncate_is_retried_before_the_next_batch(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    j.append(rec(1))
    before = file_bytes(jpath)
    fs.write_plan = ["half", "eio"]
    fs.truncate_plan = ["eio"]
    with pytest.raises(JournalWriteError):
        j.append(rec(2, pad="z" * 1000))
    # the undo failed: the half line is still on disk, and nothing has been appended after it
    assert file_bytes(jpath).startswith(before) and len(file_bytes(jpath)) > len(before)
    assert read_journal(jpath).torn_tail_bytes > 0
    assert fs.truncates == [len(before)]

    j.append(rec(3))  # the next batch truncates first, then writes
    assert fs.truncates == [len(before), len(before)]
    assert file_bytes(jpath) == before + encode(rec(3))
    result = read_journal(jpath)
    assert result.records == [rec(1), rec(3)] and result.bad_lines == 0 and result.torn_tail_bytes == 0
    j.append(rec(4))
    assert fs.truncates == [len(before), len(before)]  # no more truncating once it is clean


def test_truncate_failing_again_fails_that_batch_too(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    j.append(rec(1))
    before = file_bytes(jpath)
    writes = fs.writes
    fs.write_plan = ["eio"]
    fs.truncate_plan = ["eio", "eio", "eio"]  # the undo, then the retry and its undo
    with pytest.raises(JournalWriteError):
        j.append(rec(2))
    with pytest.raises(JournalWriteError):
        j.append(rec(3))
    assert fs.writes == writes + 1  # the second batch never wrote: it could not clean up first
    j.append(rec(4))
    assert file_bytes(jpath) == before + encode(rec(4))
    assert read_journal(jpath).records == [rec(1), rec(4)]


def test_rewrite_forgets_a_pending_truncate(jpath: Path, opened: list[Journal]) -> None:
    """A truncate left over from a failed batch must not be applied to the new (rewritten) file."""
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    j.append_many([rec(i, pad="p" * 200) for i in range(10)])
    fs.write_plan = ["half", "eio"]
    fs.truncate_plan = ["eio"]
    with pytest.raises(JournalWriteError):
        j.append(rec(10, pad="q" * 500))
    j.rewrite([rec(0)])
    j.append(rec(11))
    assert file_bytes(jpath) == encode(rec(0)) + encode(rec(11))
    assert read_journal(jpath).records == [rec(0), rec(11)]


# ----------------------------------------------------------------- record size cap
def _record_of_size(size: int) -> dict[str, Any]:
    overhead = len(encode({"type": "big", "pad": ""}))
    return {"type": "big", "pad": "x" * (size - overhead)}


def test_record_at_the_cap_is_written(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    r = _record_of_size(MAX_RECORD_BYTES)
    assert len(encode(r)) == MAX_RECORD_BYTES
    assert j.append(r) == MAX_RECORD_BYTES
    assert read_journal(jpath).records == [r]


def test_record_over_the_cap_is_refused_and_nothing_is_written(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    j.append(rec(1))
    before = file_bytes(jpath)
    batches, writes = j.batches, fs.writes
    with pytest.raises(ValueError) as info:
        j.append(_record_of_size(MAX_RECORD_BYTES + 1))
    assert str(MAX_RECORD_BYTES) in str(info.value)
    with pytest.raises(ValueError):  # one oversize record refuses the whole group
        j.append_many([rec(2), _record_of_size(MAX_RECORD_BYTES + 1)])

    async def main() -> None:
        with pytest.raises(ValueError):
            await j.append_async(_record_of_size(MAX_RECORD_BYTES + 100))

    asyncio.run(main())
    assert file_bytes(jpath) == before and j.size == len(before)
    assert j.batches == batches and fs.writes == writes
    j.append(rec(3))
    assert read_journal(jpath).records == [rec(1), rec(3)]


def test_multibyte_text_counts_bytes_for_the_cap(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    with pytest.raises(ValueError):
        j.append({"type": "big", "pad": "€" * (MAX_RECORD_BYTES // 3 + 1)})  # fewer chars than the cap
    assert jpath.stat().st_size == 0


# ----------------------------------------------------------------- rewrite
def test_rewrite_replaces_the_file_and_keeps_the_lock(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append_many([rec(i) for i in range(10)])
    old_inode = jpath.stat().st_ino
    kept = [rec(2), rec(7)]
    j.rewrite(kept)
    assert file_bytes(jpath) == b"".join(encode(r) for r in kept)
    assert j.size == jpath.stat().st_size
    assert jpath.stat().st_ino != old_inode
    assert (jpath.stat().st_mode & 0o777) == 0o600
    assert [p.name for p in jpath.parent.iterdir() if p.name.endswith(".tmp")] == []
    with pytest.raises(JournalLocked):
        Journal.open(jpath)
    child = run_child(jpath)
    assert child.returncode == 3, child.stderr

    assert j.append(rec(20)) == j.size == jpath.stat().st_size
    j.close()
    _, result = open_j(jpath, opened)
    assert result.records == [*kept, rec(20)]


def test_rewrite_to_nothing(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append(rec(1))
    j.rewrite([])
    assert j.size == 0 and jpath.stat().st_size == 0
    j.append(rec(2))
    assert read_journal(jpath).records == [rec(2)]


def test_rewrite_refuses_while_appends_are_queued(jpath: Path, opened: list[Journal]) -> None:
    fs = ScriptedFs()
    j, _ = open_j(jpath, opened, fs.ops())
    gate = threading.Event()
    fs.block_next_write = gate
    first = j.submit([rec(1)])
    assert fs.write_entered.wait(WAIT_S)
    second = j.submit([rec(2)])
    try:
        with pytest.raises(JournalError) as info:
            j.rewrite([])
        assert "quiet" in str(info.value)
    finally:
        gate.set()
    first.result(timeout=WAIT_S)
    second.result(timeout=WAIT_S)
    assert read_journal(jpath).records == [rec(1), rec(2)]


def test_rewrite_refuses_oversize_records_and_keeps_the_old_file(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append_many([rec(1), rec(2)])
    before = file_bytes(jpath)
    with pytest.raises(ValueError):
        j.rewrite([rec(1), _record_of_size(MAX_RECORD_BYTES + 1)])
    assert file_bytes(jpath) == before
    assert sorted(p.name for p in jpath.parent.iterdir()) == sorted([jpath.name, j.lock_path.name])  # no temp
    j.append(rec(3))
    assert read_journal(jpath).records == [rec(1), rec(2), rec(3)]


# ----------------------------------------------------------------- odds and ends
def test_submit_returns_a_future(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    fut = j.submit([rec(1), rec(2)])
    assert isinstance(fut, Future)
    assert fut.result(timeout=WAIT_S) == len(encode(rec(1))) + len(encode(rec(2)))


def test_empty_append_many_is_harmless(jpath: Path, opened: list[Journal]) -> None:
    j, _ = open_j(jpath, opened)
    j.append(rec(1))
    assert j.append_many([]) == j.size
    assert read_journal(jpath).records == [rec(1)]


def test_flusher_thread_ends_on_close(jpath: Path) -> None:
    before = set(threading.enumerate())
    j, _ = Journal.open(jpath)
    started = [t for t in threading.enumerate() if t not in before]
    assert [t.name for t in started] == [f"journal-{jpath.stem}"]
    assert started[0].daemon
    j.close()
    started[0].join(WAIT_S)
    assert not started[0].is_alive()
