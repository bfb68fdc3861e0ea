"""Small files read on every message (a harness's session record, the user's settings), parsed once and reused while
a stat proves the file unchanged.

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

import os
import stat
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from crosstalk.fs.reading import open_regular, read_fd_capped

T = TypeVar("T")
RACY_NS = 3_000_000_000  # coarser than any timestamp granularity a config dir sits on (FAT's 2 s included)
MAX_ENTRIES = 64

Key = tuple[int, int, int, int, int, int, int]


def _key(st: os.stat_result) -> Key:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_mode, st.st_uid)


class StatCache(Generic[T]):
    """path -> parse(the file's bytes), reread whenever the file's stat differs from the one it was read under."""

    def __init__(self, parse: Callable[[bytes], T | None], limit: int, max_entries: int = MAX_ENTRIES) -> None:
        self._parse, self._limit, self._max = parse, limit, max_entries
        self._entries: dict[str, tuple[Key, T | None]] = {}
        self._lock = threading.Lock()
        self.reads = 0  # files opened and parsed (a test's and a benchmark's view of the cache)

    def get(self, path: str | os.PathLike[str]) -> T | None:
        name = os.fspath(path)
        try:
            st = os.lstat(name)
        except OSError:
            self._drop(name)
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > self._limit:
            self._drop(name)
            return None  # a symlink, FIFO, device or directory, or over the cap: what read_capped refuses
        with self._lock:
            hit = self._entries.get(name)
        if hit is not None and hit[0] == _key(st):
            return hit[1]
        return self._read(name)

    def _read(self, name: str) -> T | None:
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
        with self._lock:
            if len(self._entries) >= self._max and name not in self._entries:
                self._entries.clear()
            self._entries[name] = (_key(st), value)
        return value

    def _drop(self, name: str) -> None:
        with self._lock:
            self._entries.pop(name, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
