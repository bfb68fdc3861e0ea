"""Opening a file someone else may have planted: never through a symlink, never blocking on a FIFO or a device,
regular files only (open_regular); reading never more than a cap (read_capped). Every open of a path in the state
root goes through open_regular.

read_line: the first line a blocking socket answers, never more than a cap read.

StatCache: small files read on every message (a harness's session record, the user's settings), parsed once and
reused while a stat proves the file unchanged.

`StatCache.get(path)` answers what `parse(read_capped(path, limit))` would, with read_capped's refusals kept: a
missing or unreadable file, a symlink (the last component), anything but a regular file, or a file over the cap is
None. The stat (lstat: never through a symlink) is taken on every call; the cached value is used only when the file
at the path is the same one, unchanged: the same (st_dev, st_ino, st_mtime_ns, st_size), and the same st_ctime_ns,
mode and owner (a chmod, chown or rename changes ctime). Otherwise the file is opened (open_regular), read and
parsed again, and the stat of the descriptor actually read becomes the key.

A rewrite within one timestamp tick keeps mtime and maybe size (a truncate-and-write of a same-length value), so a
file changed less than RACY_NS before it was read is never cached: the next call reads it again (as git treats a
"racily clean" index entry). A change the user makes is therefore seen on the next call, however quick.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from crosstalk.core import untrusted
from crosstalk.fs.errors import NotRegularFile

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    import _socket
    from collections.abc import Callable
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


def read_line(sock: _socket.socket, limit: int) -> bytes:
    """The first line `sock` gives (without its newline), reading until a newline, the peer's EOF or more than
    `limit` bytes (then what came, cut at a newline if there is one). Blocking: the socket's own timeout bounds it."""
    chunks: list[bytes] = []
    total = 0
    while True:
        data = sock.recv(65536)
        if not data:
            break
        chunks.append(data)
        total += len(data)
        if b"\n" in data or total > limit:
            break
    return b"".join(chunks).split(b"\n", 1)[0]


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


RACY_NS = 3_000_000_000  # coarser than any timestamp granularity a config dir sits on (FAT's 2 s included)
MAX_ENTRIES = 64

Key = tuple[int, int, int, int, int, int, int]


def _key(st: os.stat_result) -> Key:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_mode, st.st_uid)


class StatCache:
    """path -> parse(the file's bytes), reread whenever the file's stat differs from the one it was read under."""

    def __init__(self, parse: Callable[[bytes], Any], limit: int, max_entries: int = MAX_ENTRIES) -> None:
        self._parse, self._limit, self._max = parse, limit, max_entries
        self._entries: dict[str, tuple[Key, Any]] = {}  # each get, set and pop is atomic: no lock (a race reads twice)
        self.reads = 0  # files opened and parsed (a test's and a benchmark's view of the cache)

    def get(self, path: str | os.PathLike[str]) -> Any:
        name = os.fspath(path)
        try:
            st = os.lstat(name)
        except OSError:
            self._drop(name)
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > self._limit:
            self._drop(name)
            return None  # a symlink, FIFO, device or directory, or over the cap: what read_capped refuses
        hit = self._entries.get(name)
        if hit is not None and hit[0] == _key(st):
            return hit[1]
        return self._read(name)

    def _read(self, name: str) -> Any:
        try:
            fd = open_regular(name)
        except OSError:
            self._drop(name)
            return None
        try:
            st = os.fstat(fd)
            raw = read_fd_capped(fd, self._limit)
        except OSError:
            self._drop(name)
            return None
        finally:
            os.close(fd)
        self.reads += 1
        value = None if raw is None else self._parse(raw)
        settled = time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS
        if raw is None or len(raw) != st.st_size or not settled:
            self._drop(name)  # over the cap, changing while read, or too fresh to trust its stat: read next time
            return value
        if len(self._entries) >= self._max and name not in self._entries:
            self._entries.clear()
        self._entries[name] = (_key(st), value)
        return value

    def _drop(self, name: str) -> None:
        self._entries.pop(name, None)

    def clear(self) -> None:
        self._entries.clear()
