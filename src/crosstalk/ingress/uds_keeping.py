"""Kept connections on an agent's socket, served: one loop for both frame kinds that may ask for one.

A frame that asks to keep the connection (a task frame's `"keep": true`, uds_tasks.py; a crosstalk user line's
`crosstalk.keep`, the relay process's hop) is answered with `"kept": true` (KEPT_TAIL, frames.py), and the next
frame of the same kind follows on the same connection with no auth line again, up to MAX_FRAMES; the sender's proof
(the key, and its SO_PEERCRED pid) is the connection's. A sender from before kept connections never asks; an agent
from before them ignores the field, answers the one frame and closes, and the sender (uds_kept.py) reconnects.

A kept connection waiting for its next frame is listed in the socket's IdleKept, longest idle first: a socket at
its connection cap sheds the first of them to admit a new connection (uds.py), never one with a frame in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from crosstalk.ingress.errors import FrameError
from crosstalk.ingress.frames import KEPT_TAIL, MAX_LINE_BYTES, TaskLine, UserLine, encode_error_answer, parse_line

KEEP_IDLE_S = 90.0  # a kept connection with no next frame this long is closed (the sender's idle close is sooner)
MAX_FRAMES = 10_000  # frames served on one connection; the last is answered without `kept` and the peer reconnects
WRITE_TIMEOUT_S = 10.0


class IdleKept:
    """The handlers of one socket's kept connections that wait for their next frame, longest idle first (a dict
    keeps insertion order: a handler is added when its wait starts and removed when it ends)."""

    def __init__(self) -> None:
        self._waiting: dict[asyncio.Task[Any], None] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, handler: asyncio.Task[Any]) -> None:
        self._waiting[handler] = None

    def discard(self, handler: asyncio.Task[Any]) -> None:
        self._waiting.pop(handler, None)

    def shed(self) -> asyncio.Task[Any] | None:
        """Cancel the longest-idle handler, and return it: its wait for a frame ends and its connection closes with
        nothing read. A frame its sender wrote meanwhile is unread, never served: the sender, finding the connection
        closed, sends it again on a fresh one (uds_kept.py). None when no kept connection is idle."""
        for handler in self._waiting:
            del self._waiting[handler]
            handler.cancel()
            return handler
        return None


def cancelled_here() -> bool:
    """Whether the running handler itself is being cancelled (the agent closing, or its connection shed), as against
    a CancelledError from a future inside what it awaited."""
    me = asyncio.current_task()
    return me is not None and me.cancelling() > 0


def task_keeps(line: TaskLine) -> bool:
    return line.params.get("keep") is True


def user_keeps(line: UserLine) -> bool:
    return line.crosstalk is not None and line.crosstalk.get("keep") is True


async def serve_kept(
    line: TaskLine | UserLine,
    answer: Callable[[Any], Awaitable[bytes]],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    idle: IdleKept | None = None,
) -> bytes | None:
    """Answer frames on one authenticated connection: `line`, then, while each asks to keep the connection, the
    next one of the same kind, up to MAX_FRAMES. Each answer but the last is written here with `"kept": true`; the
    last (a frame without keep, the cap reached, a bad line) is returned for the caller to write before it closes;
    None: the peer closed, sent nothing for KEEP_IDLE_S or did not take an answer within WRITE_TIMEOUT_S (closed
    without a word; every frame read was answered). `idle`: where this connection is listed while it waits for its
    next frame (the socket may shed it then: CancelledError)."""
    keeps: Callable[[Any], bool] = task_keeps if isinstance(line, TaskLine) else user_keeps
    me = asyncio.current_task()
    for _ in range(MAX_FRAMES - 1):
        out = await answer(line)
        if not keeps(line):
            return out
        writer.write(out[:-2] + KEPT_TAIL)  # every answer is one JSON object and a newline: `}\n`
        # asyncio.timeout, not wait_for: wait_for runs the read as a task of its own, two event-loop steps more
        # between the frame's bytes and its answer (a drain that need not wait: one).
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await writer.drain()
        except (TimeoutError, ConnectionError):
            return None  # the peer does not take its answers, or is gone: nothing more is served here
        if idle is not None and me is not None:
            idle.add(me)
        try:
            async with asyncio.timeout(KEEP_IDLE_S):
                raw = await reader.readuntil(b"\n")
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return None
        except asyncio.LimitOverrunError:
            return encode_error_answer(f"frame: frame line is over the {MAX_LINE_BYTES}-byte limit")
        finally:
            if idle is not None and me is not None:
                idle.discard(me)
        if cancelled_here():
            raise asyncio.CancelledError  # shed as its frame came in: unread, never served
        try:
            next_line = parse_line(raw)
        except FrameError as exc:
            return encode_error_answer(f"frame: {exc}")
        if isinstance(line, TaskLine):
            if not isinstance(next_line, TaskLine):
                return encode_error_answer("frame: only task lines follow a task line on a kept connection")
        elif not isinstance(next_line, UserLine) or next_line.is_native:
            return encode_error_answer("frame: only crosstalk user lines follow one on a kept connection")
        line = next_line
    return await answer(line)  # the cap: answered without `kept`, then closed
