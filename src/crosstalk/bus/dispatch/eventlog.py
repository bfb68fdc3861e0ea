"""The dispatcher's event log: the writer (one line per event, rotated at MAX_LOG_BYTES) and its readers (`logs`,
`server logs`: the last lines, and following the file as it grows)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from crosstalk.bus.protocol.message import utc_timestamp

MAX_LOG_BYTES = 5 * 1024 * 1024  # the current file is renamed to <log>.1 (one old file kept) past this size
_MAX_VALUE_CHARS = 2000
_TAIL_BYTES = 4 * 1024 * 1024
_FOLLOW_POLL_S = 0.2


def rotated_path(path: Path) -> Path:
    """Where the previous log lives after a rotation: dispatcher.log -> dispatcher.log.1."""
    return path.with_name(path.name + ".1")


def _field(value: object) -> str:
    text = "-" if value is None else str(value)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 1] + "…"
    if not text or any(ch.isspace() or ch in '"=' for ch in text):
        return json.dumps(text, ensure_ascii=False)
    return text


class EventLog:
    """One line per event, `<iso time> <level> <event> key=value ...`, appended to the log file and/or a stream.
    Values with spaces or quotes are JSON-quoted so a line always splits back into its fields.

    A line that would take the file past `max_bytes` first renames it to <log>.1 (replacing an older one), so the
    log never holds more than about 2 × max_bytes (0 turns rotation off). `follow_fds` are descriptors that point
    at the log file (the daemon's stdout/stderr under `server start`): a rotation re-points them at the new file,
    so a stray traceback lands in the current log rather than in the old one."""

    def __init__(
        self,
        path: Path | None,
        *,
        stream: TextIO | None = None,
        max_bytes: int = MAX_LOG_BYTES,
        follow_fds: Sequence[int] = (),
    ) -> None:
        self.path = path
        self.stream = stream
        self.max_bytes = max_bytes
        self.follow_fds = tuple(follow_fds)
        self._lock = threading.Lock()

    def __call__(self, event: str, level: str = "info", **fields: object) -> None:
        parts = [utc_timestamp(), level, event, *(f"{key}={_field(value)}" for key, value in fields.items())]
        line = " ".join(parts) + "\n"
        with self._lock:
            if self.path is not None:
                self._append(self.path, line.encode("utf-8", errors="replace"))
            if self.stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.stream.write(line)
                    self.stream.flush()

    def _append(self, path: Path, data: bytes) -> None:
        fd = _open_append(path)
        try:
            size = os.fstat(fd).st_size
            if self.max_bytes > 0 and size > 0 and size + len(data) > self.max_bytes:
                os.close(fd)
                fd = -1
                os.replace(path, rotated_path(path))
                fd = _open_append(path)
                for target in self.follow_fds:
                    with contextlib.suppress(OSError):
                        os.dup2(fd, target)
            os.write(fd, data)
        finally:
            if fd >= 0:
                os.close(fd)


def _open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


def same_file(stream: TextIO, path: Path) -> bool:
    """Whether stream writes into path (the daemon spawned by `server start` has stderr appended to its log)."""
    try:
        a, b = os.fstat(stream.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _tail_of(path: Path, count: int) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL_BYTES))
            data = fh.read()
    except FileNotFoundError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[-count:]


def tail_lines(path: Path, count: int) -> list[str]:
    """The last `count` lines of the log (reads at most the last few MiB of each file); when the current file has
    fewer, the rest come from the end of the rotated one."""
    if count <= 0:
        return []
    lines = _tail_of(path, count)
    if len(lines) < count:
        lines = _tail_of(rotated_path(path), count - len(lines)) + lines
    return lines


def _identity(path: Path) -> tuple[int, int, int] | None:
    """(device, inode, size) of path, or None when it is missing."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_size


def _read_from(path: Path, offset: int, limit: int | None = None) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read() if limit is None else fh.read(limit)
    except FileNotFoundError:
        return b""


def follow(path: Path, *, duration: float | None = None, stop: threading.Event | None = None) -> Iterator[str]:
    """New lines appended to the log, until `duration` seconds pass or `stop` is set. A rotation is followed into
    the new file (after the rest of the old one, when it is still <log>.1); a truncation restarts at its top."""
    deadline = None if duration is None else time.monotonic() + duration
    start = _identity(path)
    file_id = start[:2] if start else None
    offset = start[2] if start else 0
    partial = b""
    while (deadline is None or time.monotonic() < deadline) and not (stop and stop.is_set()):
        now = _identity(path)
        chunk = b""
        if now is not None and file_id is not None and now[:2] != file_id:
            # Rotated: finish the old file if it is the one renamed to .1, then read the new one from its top.
            old = _identity(rotated_path(path))
            if old is not None and old[:2] == file_id:
                chunk = _read_from(rotated_path(path), offset)
            file_id, offset = now[:2], 0
        elif now is not None and file_id is None:
            file_id, offset = now[:2], 0
        size = now[2] if now else 0
        if size < offset:
            offset, partial = 0, b""
        if size > offset:
            new = _read_from(path, offset, size - offset)
            offset += len(new)
            chunk += new
        if chunk:
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                yield line.decode("utf-8", errors="replace")
            continue
        time.sleep(_FOLLOW_POLL_S)
