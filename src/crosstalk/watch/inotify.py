"""Linux inotify through ctypes: "something changed in one of these directories", as a file descriptor an event
loop can wait on. Nothing is polled: the kernel wakes the reader when a watched directory changes.

Only what watch needs: watch directories (never files: atomic writes replace files by rename, which a directory
watch sees), drain the queue, say which directories had events. `Inotify.create()` is None where inotify is not
available (another OS, a libc without it, the per-user watch limit reached); the caller then falls back to a timer.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from pathlib import Path

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

DIR_EVENTS = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
)  # fmt: skip
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)


class Inotify:
    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc = libc
        self.fd = fd
        self._wd: dict[int, Path] = {}
        self._path: dict[Path, int] = {}

    @classmethod
    def create(cls) -> Inotify | None:
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name or "libc.so.6", use_errno=True)
            init = libc.inotify_init1
        except (OSError, AttributeError):
            return None
        init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_add_watch.restype = ctypes.c_int
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.inotify_rm_watch.restype = ctypes.c_int
        fd = init(IN_NONBLOCK | IN_CLOEXEC)
        return None if fd < 0 else cls(libc, fd)

    def watch(self, directories: list[Path]) -> None:
        """Watch each directory that exists (again after it was replaced); forget those that are gone."""
        for d in directories:
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(d), DIR_EVENTS)
            if wd >= 0:
                old = self._path.get(d)
                if old is not None and old != wd:
                    self._wd.pop(old, None)
                self._wd[wd], self._path[d] = d, wd
            elif ctypes.get_errno() == errno.ENOSPC:  # the user's watch limit: what is watched still works
                break

    def read(self) -> set[Path] | None:
        """The directories with events since the last read (empty when none); None when the queue overflowed and
        anything may have changed."""
        changed: set[Path] = set()
        overflow = False
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                break
            if not data:
                break
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, at)
                at += _EVENT.size + size
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                path = self._wd.get(wd)
                if path is None:
                    continue
                changed.add(path)
                if mask & IN_IGNORED:  # the directory went away: its watch is gone with it
                    del self._wd[wd]
                    self._path.pop(path, None)
        return None if overflow else changed

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
