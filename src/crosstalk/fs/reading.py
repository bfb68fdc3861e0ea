"""Opening a file someone else may have planted: never through a symlink, never blocking on a FIFO or a device,
regular files only (open_regular); reading never more than a cap (read_capped). Every open of a path in the state
root goes through open_regular."""

from __future__ import annotations

import errno
import os
import stat

from crosstalk.core import untrusted
from crosstalk.fs.errors import NotRegularFile

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symlink"),
)


def describe_mode(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """os.open(path, flags) for a regular file only: never follows a symlink (the last component), never blocks on a
    FIFO or a device (O_NONBLOCK: no effect on a regular file), and refuses anything that is not a regular file with
    NotRegularFile. Other errors (FileNotFoundError, PermissionError) propagate; the caller closes the fd."""
    try:
        fd = os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            try:
                what = describe_mode(os.lstat(path).st_mode)
            except OSError:
                raise exc from None
            raise NotRegularFile(path, what) from None
        raise
    try:
        st_mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st_mode):
        os.close(fd)
        raise NotRegularFile(path, describe_mode(st_mode))
    return fd


def read_capped(path: Path | str, limit: int) -> bytes | None:
    """The whole file at `path`, or None when it is missing, unreadable, not a regular file, a symlink, or larger
    than `limit` bytes."""
    try:
        fd = open_regular(path)
    except OSError:
        return None
    try:
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
        data = untrusted.loads(raw, what=str(path), max_bytes=limit) if raw.strip() else {}
    except untrusted.UntrustedInput as exc:  # not JSON, or nested too deeply
        raise ValueError(f"{exc}; fix it, then try again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object; fix it, then try again")
    return data
