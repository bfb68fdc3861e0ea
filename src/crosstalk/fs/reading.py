"""Reading a file someone else may have planted: never through a symlink, never blocking on a FIFO, never more
than a cap."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any


def read_capped(path: Path | str, limit: int) -> bytes | None:
    """The whole file at `path`, or None when it is missing, unreadable, not a regular file, a symlink, or larger
    than `limit` bytes."""
    try:
        # O_NONBLOCK: a FIFO planted under the name must not hang the reader.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_fd_capped(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_fd_capped(fd: int, limit: int) -> bytes | None:
    """Everything left to read from `fd`, or None when it is more than `limit` bytes (never reading past limit + 1).
    The caller owns (and closes) the descriptor; OSError propagates."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return None if size > limit else b"".join(chunks)


def read_json_object(path: Path | str, limit: int) -> dict[str, Any]:
    """The JSON object in a config file someone else edits: {} when it is missing or empty; ValueError naming the
    file and the fix when it cannot be read (a symlink, not a regular file, over `limit`), is not JSON or is not
    an object."""
    if not os.path.lexists(path):
        return {}
    raw = read_capped(path, limit)
    if raw is None:
        raise ValueError(f"{path}: cannot read it (not a regular file, a symlink, or over {limit} bytes)")
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); fix it, then try again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object; fix it, then try again")
    return data
