"""The shim process's own stdio for the MCP server: stdin as a StreamReader, and fd 1 reserved for the protocol
(duplicated for it, then pointed at stderr, so a stray print or a child process cannot corrupt the stream). Pipes
and sockets go through asyncio's pipe transports; a file, a tty or /dev/null is read on a thread and written with
plain blocking writes. `LineReader` reads request lines, dropping an over-limit line whole."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from crosstalk.ingress import taps


class _BlockingWriter:
    """stdout that is not a pipe (a file, a tty): plain blocking writes."""

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe  # keeps the fd open

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        fd = self.pipe.fileno()
        while view:
            view = view[os.write(fd, view) :]

    async def drain(self) -> None:
        return None


async def stdout_writer(loop: asyncio.AbstractEventLoop) -> Any:
    """Reserve fd 1 for the protocol: duplicate it, then point fd 1 (and sys.stdout) at stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    pipe = os.fdopen(fd, "wb", buffering=0)
    if not _is_pollable(fd):  # a file, a tty, /dev/null
        return taps.tap_writer(_BlockingWriter(pipe), "mcp")
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    return taps.tap_writer(asyncio.StreamWriter(transport, protocol, None, loop), "mcp")


def _is_pollable(fd: int) -> bool:
    """A pipe or a socket: what asyncio's pipe transports handle everywhere (epoll refuses files and /dev/null)."""
    import stat

    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def stdin_reader(loop: asyncio.AbstractEventLoop, limit: int) -> asyncio.StreamReader:
    """This process's stdin as a StreamReader whose lines may be `limit` bytes long."""
    reader = taps.tap_reader(asyncio.StreamReader(limit=limit), "mcp")
    pipe = os.fdopen(os.dup(0), "rb", buffering=0)
    if _is_pollable(pipe.fileno()):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    else:  # a file, a tty or /dev/null: read it on a thread
        import threading

        def pump() -> None:
            try:
                while chunk := pipe.read(65536):
                    loop.call_soon_threadsafe(reader.feed_data, chunk)
            except OSError:
                pass
            finally:
                loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=pump, name="stdin", daemon=True).start()
    return reader


class LineReader:
    """Request lines from a StreamReader. An over-limit line is reported once, as soon as the limit is passed, and
    then all of it, up to and including its newline, is dropped however many writes it arrives in.

    StreamReader.readline cannot do this: past the limit it clears what it holds and returns, so the rest of the
    line, arriving later, would be read as a line of its own (and run as a request)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self._dropping = False  # inside an over-limit line: read up to its newline and drop it

    async def next(self) -> bytes | None:
        """The next line with its newline (the last may lack it; b"" at EOF), or None for a line over the limit."""
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # EOF
                return b"" if self._dropping else exc.partial
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)  # already buffered: drop it
                if not self._dropping:
                    self._dropping = True
                    return None
                continue
            if not self._dropping:
                return line
            self._dropping = False  # that was the over-limit line's tail
