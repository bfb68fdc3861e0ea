"""Kept connections for task frames (uds_task_client.py): one sending agent's connections to one peer's socket.

A connection is opened and authenticated once (the peer's key line), then carries one task frame at a time: the
frame, then its answer line, so an answer always belongs to the frame just written. The peer says with each answer
whether it keeps the connection (`"kept": true`, uds_tasks.py); one that does not (an agent from before kept
connections, or at its cap of frames per connection) closes it after the answer, and so does this side.

Bounded: at most MAX_KEPT connections per peer are kept (a send past them gets a connection of its own, closed
after its answer, as before kept connections); an idle connection is closed after IDLE_S, and all of them at
close(). A kept connection the peer closed meanwhile (it restarted, or timed the connection out) is dropped when
taken; one that fails after its frame was written is retried once on a fresh connection: the frame carries the same
message_id, and the peer's dedupe answers a copy it already took with the first one's task, never a second delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from crosstalk.ingress.errors import KeptBroken, KeptUnreachable
from crosstalk.ingress.frames import MAX_LINE_BYTES, says_kept

CONNECT_TIMEOUT_S = 5.0
IDLE_S = 30.0  # a kept connection unused this long is closed (the peer keeps one KEEP_IDLE_S: longer)
MAX_KEPT = 4  # connections kept per peer; sends past them at once each get a connection of their own
CLOSE_WAIT_S = 1.0


@dataclass(slots=True, eq=False)
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    kept: bool  # asked the peer to keep it: counted in the peer's MAX_KEPT
    reused: bool = False  # carried a frame before this one
    idle_since: float = field(default_factory=time.monotonic)

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing() or self.reader.exception() is not None)

    async def exchange(self, line: bytes, wait: float) -> bytes:
        """Write one frame and read its answer line. Raises KeptBroken (nothing answered) or TimeoutError."""
        try:
            self.writer.write(line)
            if not self.kept and self.writer.can_write_eof():
                self.writer.write_eof()  # a connection of its own: the peer may see the end at once
            await asyncio.wait_for(self.writer.drain(), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise KeptBroken(f"the request failed mid-way: {exc}", sent=True) from None
        try:
            return await asyncio.wait_for(self.reader.readuntil(b"\n"), wait)
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                return exc.partial
            raise KeptBroken("the connection closed without an answer", sent=True) from None
        except TimeoutError:
            raise  # no answer in time: the frame may still be served, so never sent again
        except OSError as exc:
            raise KeptBroken(f"the connection failed: {exc}", sent=True) from None

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.writer.wait_closed(), CLOSE_WAIT_S)


class KeptConnections:
    """The connections to one peer socket, opened with `auth` (the key line) written first."""

    def __init__(self, path: str, auth: bytes) -> None:
        self.path = path
        self._auth = auth
        self._idle: list[Conn] = []
        self._count = 0  # kept connections open (idle or carrying a frame)
        self._reaper: asyncio.TimerHandle | None = None
        self._closed = False
        self.opened = 0  # connections opened, for tests and benchmarks

    async def take(self) -> Conn:
        """An idle kept connection the peer has not closed, or a new one (kept while under MAX_KEPT)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            self._count -= 1
            await conn.close()
        kept = not self._closed and self._count < MAX_KEPT
        if not kept:
            return await self.open(False)
        self._count += 1  # before the connect: sends taking a connection meanwhile see the slot taken
        try:
            return await self.open(True)
        except BaseException:
            self._count -= 1
            raise

    async def open(self, kept: bool) -> Conn:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.path, limit=MAX_LINE_BYTES + 2), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            raise KeptUnreachable(f"nothing answers on {self.path}: {exc}") from None
        self.opened += 1
        writer.write(self._auth)  # buffered: it leaves with the first frame
        return Conn(reader, writer, kept)

    async def give_back(self, conn: Conn, *, keep: bool) -> None:
        """`conn` after its frame: kept idle when the peer kept it and it answered cleanly, else closed."""
        if keep and conn.kept and not self._closed and conn.usable():
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
            self._schedule_reap()
            return
        if conn.kept:
            self._count -= 1
        await conn.close()

    async def request(self, line: bytes, wait: float) -> bytes:
        """One frame on a kept connection (or one of its own past MAX_KEPT) and its answer line; the connection is
        kept after it when the answer says the peer keeps it. A kept connection that broke after the frame left
        (the peer restarted, or shed it) is retried once on a fresh one: the same frame, the same message_id, so a
        copy the peer already took is answered from its dedupe, never delivered twice. Raises KeptUnreachable,
        KeptBroken, TimeoutError (no answer in `wait`: never sent again) or asyncio.LimitOverrunError."""
        try:
            return await self._request_once(line, wait)
        except KeptBroken as exc:
            if not exc.reused:
                raise
            await self.drop_idle()  # the peer dropped a kept one: the others are likely gone too
            return await self._request_once(line, wait)

    async def _request_once(self, line: bytes, wait: float) -> bytes:
        conn = await self.take()
        kept = False
        try:
            try:
                raw = await conn.exchange(line, wait)
            except KeptBroken as exc:
                exc.reused = conn.reused
                raise
            kept = says_kept(raw)
            return raw
        finally:
            await self.give_back(conn, keep=kept)

    def _schedule_reap(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().call_later(IDLE_S, self._reap)

    def _reap(self) -> None:
        """Close the connections idle IDLE_S (no wait for the close to finish: nothing more is read from them)."""
        self._reaper = None
        cutoff = time.monotonic() - IDLE_S + 0.05
        stale = [c for c in self._idle if c.idle_since <= cutoff]
        self._idle = [c for c in self._idle if c.idle_since > cutoff]
        self._count -= len(stale)
        for conn in stale:
            conn.writer.close()
        if self._idle:
            self._schedule_reap()

    async def drop_idle(self) -> None:
        """Close every idle connection (the peer dropped one: it restarted, the others are gone too)."""
        idle, self._idle = self._idle, []
        self._count -= len(idle)
        await asyncio.gather(*(c.close() for c in idle))

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        idle, self._idle = self._idle, []
        self._count -= len(idle)
        await asyncio.gather(*(c.close() for c in idle))
