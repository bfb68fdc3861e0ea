"""The journal writer: one per agent, held under a lock, group commit with one fsync per batch.

Every append returns only after its bytes are fsynced (unless the caller marks it non-durable, e.g. an audit record
of a rejection that acknowledges nothing). Concurrent appends are batched by a single flusher thread: while one
fsync runs, new records gather and the next write + fsync covers all of them. A lone async append to a quiet journal
is written and fsynced by its caller instead (_inline_ok: no thread hop there and back, the same durability). A batch
that fails is truncated back, so a half-written line can never glue onto the next record.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.reading import NotRegularFile, open_regular
from crosstalk.journal.batch import Pending, Ticket, settle, wake
from crosstalk.journal.codec import ReadResult, encode, read_journal, scan_journal
from crosstalk.journal.errors import JournalError, JournalLocked, JournalWriteError

APPEND_TIMEOUT_S = 30.0
MAX_LINGER_S = 0.002  # the longest a batch waits for more appends (only under concurrent load)
INLINE_QUIET_S = 0.005  # an async append after this long without a write is fsynced by its caller (_inline_ok)
INLINE_MAX_FSYNC_S = 0.02  # ... unless the last fsync took longer than this (the caller's loop waits for it)


@dataclass(slots=True)
class FsOps:
    """The file-system calls the writer makes; tests replace them to inject failures."""

    write: Callable[[int, memoryview], int] = os.write
    fsync: Callable[[int], None] = os.fsync
    ftruncate: Callable[[int, int], None] = os.ftruncate


# (records, read once) → (records that head the new journal, positions of the records kept): Journal.compact_lines
LineChooser = Callable[[Iterator[dict[str, Any]]], tuple[list[dict[str, Any]], list[int]]]


@dataclass(slots=True)
class _Compaction:
    select: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    choose: LineChooser | None = None
    future: Future[tuple[int, int]] = field(default_factory=Future)


class Journal:
    """An open, locked journal file. Use `Journal.open`, then `append`/`append_async`, then `close`."""

    def __init__(self, path: Path, lock_path: Path, lock_fd: int, fd: int, size: int, fs: FsOps) -> None:
        self.path = path
        self.lock_path = lock_path
        self._lock_fd = lock_fd
        self._fd = fd
        self._size = size
        self._truncate_to: int | None = None  # set when a failed batch could not be truncated back yet
        self._fs = fs
        self._cv = threading.Condition()
        self._queue: list[Pending] = []
        self._ticket = Ticket()
        self._compactions: list[_Compaction] = []
        self._last_batch_len = 0
        self._last_fsync_s = 0.0
        self._closed = False
        self._flushing = False  # the flusher is writing a batch or compacting
        self._inline = False  # a caller is writing its own append (_write_inline)
        self._last_done = -INLINE_QUIET_S  # when the last write ended (monotonic)
        self.batches = 0  # number of write+fsync rounds, for tests and benchmarks
        self._thread = threading.Thread(target=self._flush_loop, name=f"journal-{path.stem}", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(
        cls, path: str | os.PathLike[str], lock_path: str | os.PathLike[str] | None = None, *, fs: FsOps | None = None
    ) -> tuple[Journal, ReadResult]:
        """Take the writer lock, read every complete record, drop a torn tail, and open for appending."""
        path = Path(path)
        lock = Path(lock_path) if lock_path else path.with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # The lock lives in its own file, never unlinked, because compaction replaces the journal's inode.
        # Regular files only, never through a symlink, never blocking on a FIFO planted where the lock should be.
        try:
            lock_fd = open_regular(lock, os.O_RDWR | os.O_CREAT)
        except NotRegularFile as exc:
            raise JournalError(f"journal lock {lock} is {exc.what}, not a regular file: move it away") from None
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise JournalLocked(f"journal {path} is held by another writer") from None
        try:
            result = read_journal(path)
            fd = open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            if result.torn_tail_bytes:
                os.ftruncate(fd, result.good_size)
                os.fsync(fd)
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(path, lock, lock_fd, fd, result.good_size, fs or FsOps()), result

    # ----------------------------------------------------------------- appending
    def submit(self, records: Iterable[dict[str, Any]], *, durable: bool = True) -> Future[int]:
        """Queue records for the next batch; the future resolves to the end offset once they are on disk."""
        data = b"".join(encode(r) for r in records)
        fut: Future[int] = Future()
        with self._cv:
            if self._closed:
                raise JournalError(f"journal {self.path} is closed")
            self._queue.append(Pending(data, durable, fut))
            self._cv.notify()
        return fut

    def append(self, record: dict[str, Any], *, durable: bool = True) -> int:
        return self.append_many([record], durable=durable)

    def append_many(self, records: Iterable[dict[str, Any]], *, durable: bool = True) -> int:
        data = b"".join(encode(r) for r in records)
        with self._cv:
            if self._closed:
                raise JournalError(f"journal {self.path} is closed")
            ticket = self._ticket
            self._queue.append(Pending(data, durable))
            self._cv.notify()
        if not ticket.event.wait(APPEND_TIMEOUT_S):
            raise JournalWriteError(f"journal append to {self.path} did not finish within {APPEND_TIMEOUT_S:.0f} s")
        if ticket.error is not None:
            raise JournalWriteError(str(ticket.error))
        return ticket.end

    async def append_async(self, record: dict[str, Any], *, durable: bool = True) -> int:
        return await self.append_many_async([record], durable=durable)

    async def append_many_async(self, records: Iterable[dict[str, Any]], *, durable: bool = True) -> int:
        data = b"".join(encode(r) for r in records)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        with self._cv:
            if self._closed:
                raise JournalError(f"journal {self.path} is closed")
            inline = self._inline_ok()
            if inline:
                self._inline = True
            else:
                self._ticket.async_waiters.setdefault(loop, []).append(fut)
                self._queue.append(Pending(data, durable))
                self._cv.notify()
        if inline:
            return self._write_inline(Pending(data, durable))
        # asyncio.timeout, not wait_for: on 3.11 wait_for drops a cancel that arrives with the result (an agent
        # closing would not stop this caller).
        async with asyncio.timeout(APPEND_TIMEOUT_S):
            return await fut

    def _inline_ok(self) -> bool:
        """Under the lock: may this append be written and fsynced by the caller itself, skipping the two thread
        hops (to the flusher and back to the loop)? Only a lone append, when nothing is queued or being written,
        the journal has been quiet INLINE_QUIET_S (a stream of appends goes to the flusher, which batches them)
        and the last fsync took at most INLINE_MAX_FSYNC_S (a slow disk never stalls the caller's event loop)."""
        return not (self._queue or self._compactions or self._flushing or self._inline) and (
            self._last_fsync_s <= INLINE_MAX_FSYNC_S and time.monotonic() - self._last_done >= INLINE_QUIET_S
        )

    def _write_inline(self, pending: Pending) -> int:
        """The batch of one append, written and fsynced on the caller's thread (it holds `_inline`: the flusher
        waits). The same write, fsync and undo as the flusher's: durable before this returns, or an error."""
        ticket = Ticket()
        try:
            self._write_batch([pending], ticket)
        finally:
            with self._cv:
                self._inline = False
                self._last_done = time.monotonic()
                self._cv.notify_all()
        if ticket.error is not None:
            raise JournalWriteError(str(ticket.error))
        return ticket.end

    def _flush_loop(self) -> None:
        while True:
            with self._cv:
                while (not self._queue and not self._compactions and not self._closed) or self._inline:
                    self._cv.wait()
                if not self._queue and not self._compactions:
                    return  # closed and drained
                self._flushing = True
                self._linger()
                batch, self._queue = self._queue, []
                ticket, self._ticket = self._ticket, Ticket()
                compactions, self._compactions = self._compactions, []
            try:
                if batch:
                    self._write_batch(batch, ticket)
                while compactions:  # popped, not iterated: a done job (its plan, its ids) must not outlive its run
                    self._run_compaction(compactions.pop(0))
            finally:
                with self._cv:
                    self._flushing = False
                    self._last_done = time.monotonic()

    def _linger(self) -> None:
        """Under concurrent load, give the writers the last batch just woke a moment to come back before the next
        write: thread wake-ups are slow in Python, and without this each fsync would carry only the first few of
        them. Waits at most one fsync's duration, and only while fewer appends are queued than the last batch had;
        a lone writer (last batch of one) never waits."""
        target = self._last_batch_len
        if target <= 1 or self._closed:
            return
        deadline = time.monotonic() + min(self._last_fsync_s, MAX_LINGER_S)
        while len(self._queue) < target and not self._closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._cv.wait(remaining)

    def compact(self, select: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> Future[tuple[int, int]]:
        """Rewrite the journal to the records `select` keeps (retention), on the flusher thread between two
        batches, so no append is ever in flight while the file is replaced. Every record appended before this
        call is in what `select` sees; later ones land in the new file. Resolves to (records before, after)."""
        return self._add_compaction(_Compaction(select=select))

    def compact_lines(self, choose: LineChooser) -> Future[tuple[int, int]]:
        """`compact`, in little memory: `choose(records)` reads the records once, one at a time (none is kept after
        it moves on), and returns the records to head the new journal and the positions of the records to keep,
        in order. Kept lines are copied as written, streamed into the new file (retention.select_lines; a running
        agent's memory: docs/dev/shim-memory.md)."""
        return self._add_compaction(_Compaction(choose=choose))

    def _add_compaction(self, job: _Compaction) -> Future[tuple[int, int]]:
        with self._cv:
            if self._closed:
                raise JournalError(f"journal {self.path} is closed")
            self._compactions.append(job)
            self._cv.notify()
        return job.future

    def _run_compaction(self, job: _Compaction) -> None:
        try:
            if self._truncate_to is not None:
                self._fs.ftruncate(self._fd, self._truncate_to)
                self._size, self._truncate_to = self._truncate_to, None
            if job.choose is not None:
                before, after = self._compact_lines(job.choose)
            else:
                assert job.select is not None
                records = read_journal(self.path).records
                kept = job.select(records)
                if len(kept) < len(records):
                    self._replace_file(kept)
                before, after = len(records), len(kept)
        except Exception as exc:
            settle(job.future, exc=JournalError(f"journal compaction of {self.path} failed: {exc}"))
            return
        settle(job.future, result=(before, after))

    def _compact_lines(self, choose: LineChooser) -> tuple[int, int]:
        starts, lengths = array("q"), array("q")  # where each record read is in the file

        def records() -> Iterator[dict[str, Any]]:
            for offset, length, record in scan_journal(self.path):
                starts.append(offset)
                lengths.append(length)
                yield record

        head, kept = choose(records())
        before, after = len(starts), len(head) + len(kept)
        if after < before:
            fd = open_regular(self.path, os.O_RDONLY)

            def lines() -> Iterator[bytes]:
                yield from (encode(rec) for rec in head)
                for k in kept:
                    yield os.pread(fd, lengths[k], starts[k])

            try:
                self._replace_data(lines())
            finally:
                os.close(fd)
        return before, after

    def _write_batch(self, batch: list[Pending], ticket: Ticket) -> None:
        data = b"".join(p.data for p in batch)
        start = self._size
        try:
            if self._truncate_to is not None:
                # An earlier failed batch left bytes we could not remove; nothing may follow them.
                self._fs.ftruncate(self._fd, self._truncate_to)
                start = self._size = self._truncate_to
                self._truncate_to = None
            view = memoryview(data)
            while view:
                n = self._fs.write(self._fd, view)
                view = view[n:]
            if any(p.durable for p in batch):
                t0 = time.monotonic()
                self._fs.fsync(self._fd)
                self._last_fsync_s = time.monotonic() - t0
            self._last_batch_len = len(batch)
        except Exception as exc:  # any failure, not only OSError, must fail the batch rather than the flusher
            self._undo(start)
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            err = JournalWriteError(f"journal append to {self.path} failed: {detail}")
            for p in batch:
                if p.future is not None:
                    settle(p.future, exc=err)
            wake(ticket, 0, err)
            return
        self._size = start + len(data)
        self.batches += 1
        for p in batch:
            if p.future is not None:
                settle(p.future, result=self._size)
        wake(ticket, self._size, None)

    def _undo(self, start: int) -> None:
        try:
            self._fs.ftruncate(self._fd, start)
            self._size = start
        except OSError:
            self._truncate_to = start  # retried before the next batch; if it fails again, that batch fails too

    # ----------------------------------------------------------------- compaction and close
    def rewrite(self, records: list[dict[str, Any]]) -> None:
        """Replace the whole journal with `records` (retention). Temp file, fsync, rename, fsync the directory."""
        with self._cv:
            if self._queue or self._inline or self._flushing:
                raise JournalError("rewrite needs a quiet journal")
            self._replace_file(records)

    def _replace_file(self, records: list[dict[str, Any]]) -> None:
        """Only with no batch in flight: at open (rewrite) or on the flusher thread (compact)."""
        self._replace_data(b"".join(encode(r) for r in records))  # before the temp file: a refused record leaves none

    def _replace_data(self, data: bytes | Iterable[bytes]) -> None:
        """The journal's file replaced by `data` (or its chunks, written in turn: no buffer of the whole file)."""
        size = 0

        def counted(chunks: Iterable[bytes]) -> Iterator[bytes]:
            nonlocal size
            for chunk in chunks:
                size += len(chunk)
                yield chunk

        atomic_write(self.path, counted([data] if isinstance(data, bytes) else data))
        os.close(self._fd)
        self._fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = size
        self._truncate_to = None  # a pending undo belonged to the old file; the new one holds no partial bytes

    @property
    def size(self) -> int:
        return self._size

    def close(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout=APPEND_TIMEOUT_S)
        os.close(self._fd)
        os.close(self._lock_fd)  # releases the flock; the lock file stays

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
