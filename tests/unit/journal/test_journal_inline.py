"""A lone async append to a quiet journal is written and fsynced by its caller (journal/writer.py `_inline_ok`):
durable before it returns, failures undone and raised as the flusher's are; a stream of appends, a slow disk or a
batch in flight go to the flusher, which still batches them."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.journal import Journal, JournalWriteError
from crosstalk.journal import writer as W
from crosstalk.journal.codec import encode, read_journal
from crosstalk.journal.writer import FsOps

pytestmark = pytest.mark.unit

WAIT_S = 10.0


class Recording:
    """FsOps that note which thread fsynced, and can fail or hold the next write."""

    def __init__(self) -> None:
        self.fsync_threads: list[str] = []
        self.fail_next_write = False
        self.hold: threading.Event | None = None
        self.entered = threading.Event()
        self.truncates: list[int] = []

    def ops(self) -> FsOps:
        return FsOps(write=self.write, fsync=self.fsync, ftruncate=self.ftruncate)

    def write(self, fd: int, view: memoryview) -> int:
        self.entered.set()
        hold, self.hold = self.hold, None
        if hold is not None:
            assert hold.wait(WAIT_S)
        if self.fail_next_write:
            self.fail_next_write = False
            os.write(fd, view[:3])  # a torn start, which the undo must remove
            raise OSError(errno.EIO, "injected write failure")
        return os.write(fd, view)

    def fsync(self, fd: int) -> None:
        self.fsync_threads.append(threading.current_thread().name)
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self.truncates.append(size)
        os.ftruncate(fd, size)


def rec(i: int) -> dict[str, Any]:
    return {"type": "test", "i": i}


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[tuple[Journal, Recording]]:
    fs = Recording()
    j, _ = Journal.open(tmp_path / "j" / "a.jsonl", fs=fs.ops())
    try:
        yield j, fs
    finally:
        j.close()


def test_a_lone_append_is_fsynced_by_its_caller_before_it_returns(journal: tuple[Journal, Recording]) -> None:
    j, fs = journal

    async def main() -> int:
        return await j.append_many_async([rec(1), rec(2)])

    end = asyncio.run(main())
    assert fs.fsync_threads == [threading.main_thread().name]  # no hop to the flusher thread
    assert end == j.size == len(encode(rec(1))) + len(encode(rec(2)))
    assert [r["i"] for r in read_journal(j.path).records] == [1, 2]
    assert j.batches == 1


def test_appends_close_together_go_to_the_flusher_and_are_batched(
    journal: tuple[Journal, Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    j, fs = journal
    monkeypatch.setattr(W, "INLINE_QUIET_S", 60.0)  # every append after the first comes "too soon"

    async def main() -> list[int]:
        return await asyncio.wait_for(asyncio.gather(*(j.append_async(rec(i)) for i in range(50))), WAIT_S)

    ends = asyncio.run(main())
    assert len(ends) == 50 and max(ends) == j.size
    assert fs.fsync_threads[0] == threading.main_thread().name  # the first found the journal quiet
    assert set(fs.fsync_threads[1:]) == {f"journal-{j.path.stem}"}
    assert j.batches < 50  # the rest were batched
    assert sorted(r["i"] for r in read_journal(j.path).records) == list(range(50))


def test_a_slow_last_fsync_sends_appends_to_the_flusher(
    journal: tuple[Journal, Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    j, fs = journal
    monkeypatch.setattr(W, "INLINE_QUIET_S", 0.0)
    j._last_fsync_s = W.INLINE_MAX_FSYNC_S * 2  # as a slow disk left it

    async def main() -> None:
        await j.append_async(rec(1))

    asyncio.run(main())
    assert fs.fsync_threads == [f"journal-{j.path.stem}"]


def test_an_append_while_the_flusher_writes_waits_for_it_and_keeps_order(
    journal: tuple[Journal, Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    j, fs = journal
    monkeypatch.setattr(W, "INLINE_QUIET_S", 0.0)
    gate = fs.hold = threading.Event()
    first = j.submit([rec(1)])  # the flusher takes it and holds in its write
    assert fs.entered.wait(WAIT_S)

    async def main() -> int:
        late = asyncio.ensure_future(j.append_async(rec(2)))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not late.done()  # queued behind the batch in flight, not written beside it
        gate.set()
        return await asyncio.wait_for(late, WAIT_S)

    asyncio.run(main())
    assert first.result(WAIT_S) == len(encode(rec(1)))
    assert [r["i"] for r in read_journal(j.path).records] == [1, 2]
    assert set(fs.fsync_threads) == {f"journal-{j.path.stem}"}


def test_a_failed_inline_write_is_undone_and_raised(
    journal: tuple[Journal, Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    j, fs = journal
    monkeypatch.setattr(W, "INLINE_MAX_FSYNC_S", 60.0)  # however slow this machine's disk is today

    async def main() -> None:
        await j.append_async(rec(1))
        fs.fail_next_write = True
        j._last_done = -W.INLINE_QUIET_S  # quiet again
        with pytest.raises(JournalWriteError, match="injected write failure"):
            await j.append_async(rec(2))
        j._last_done = -W.INLINE_QUIET_S
        await j.append_async(rec(3))

    asyncio.run(main())
    assert fs.fsync_threads == [threading.main_thread().name] * 2
    assert [r["i"] for r in read_journal(j.path).records] == [1, 3]  # the torn bytes of 2 were truncated back
    assert fs.truncates == [len(encode(rec(1)))]


def test_a_caller_cancelled_as_the_flusher_answers_it_ends_cancelled(
    journal: tuple[Journal, Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent closing cancels a handler whose append the flusher answers in the same loop step: the cancel is
    kept (on 3.11, `wait_for` returned the result and dropped it, so the handler ran on past its close)."""
    from crosstalk.journal import batch

    j, _fs = journal
    monkeypatch.setattr(W, "INLINE_QUIET_S", 60.0)
    j.append(rec(0))  # the journal was just written: the next append goes to the flusher
    caller: asyncio.Task[int] | None = None
    answer = batch.settle_async

    def cancel_then_answer(futures: list[asyncio.Future[int]], end: int, error: BaseException | None) -> None:
        assert caller is not None
        caller.cancel()
        answer(futures, end, error)

    monkeypatch.setattr(batch, "settle_async", cancel_then_answer)

    async def main() -> None:
        nonlocal caller
        caller = asyncio.ensure_future(j.append_async(rec(1)))
        done, _ = await asyncio.wait({caller}, timeout=WAIT_S)
        assert done, "the append never ended"
        assert caller.cancelled()

    asyncio.run(main())
