"""Kept connections for crosstalk message frames (frames.py shape (a)), served: the relay process's hop to an agent.

A crosstalk user line whose `crosstalk` object says `"keep": true`, after the auth line, asks the agent to keep the
connection: its answer (the state line) then carries `"kept": true`, and the next crosstalk user line follows on the
same connection with no auth line again, up to MAX_FRAMES; the sender's proof (the key, and its SO_PEERCRED pid) is
the connection's. An agent from before this change ignores the field, answers the one frame and closes, as ever, and
the sender (ingress/uds_kept.py's connections, relay/deliver.py) reconnects for the next. The task frames' kept
serving (uds_tasks.serve_kept) is the same shape; its constants are shared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from crosstalk.ingress.errors import FrameError
from crosstalk.ingress.frames import MAX_LINE_BYTES, UserLine, encode_error_answer, parse_line
from crosstalk.ingress.uds_tasks import KEEP_IDLE_S, KEPT_TAIL, MAX_FRAMES, WRITE_TIMEOUT_S


def wants_kept(line: UserLine) -> bool:
    return line.crosstalk is not None and line.crosstalk.get("keep") is True


async def serve_kept_lines(
    line: UserLine,
    answer: Callable[[UserLine], Awaitable[bytes]],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> bytes | None:
    """Answer crosstalk user lines on one authenticated connection: `line`, then, while each asks to keep the
    connection, the next. Each answer but the last is written here with `"kept": true`; the last (a line without
    keep, the cap reached, a bad line) is returned for the caller to write before it closes; None: the peer closed
    or sent nothing for KEEP_IDLE_S (closed without a word)."""
    for _ in range(MAX_FRAMES - 1):
        out = await answer(line)
        if not wants_kept(line):
            return out
        writer.write(out[:-2] + KEPT_TAIL)  # every state line is one JSON object and a newline: `}\n`
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\n"), KEEP_IDLE_S)
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return None
        except asyncio.LimitOverrunError:
            return encode_error_answer(f"frame: frame line is over the {MAX_LINE_BYTES}-byte limit")
        try:
            next_line = parse_line(raw)
        except FrameError as exc:
            return encode_error_answer(f"frame: {exc}")
        if not isinstance(next_line, UserLine) or next_line.is_native:
            return encode_error_answer("frame: only crosstalk user lines follow one on a kept connection")
        line = next_line
    return await answer(line)  # the cap: answered without `kept`, then closed
