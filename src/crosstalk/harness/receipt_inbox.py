"""What every harness's receipt inbox shares: a listening unix socket that the receiving session connects back to,
one capped read per connection from a process of our uid, and the sweep of inboxes crashed processes left.

A harness that answers a written message later, on a new connection to an address the writer gave (Claude's hold
receipts, Qwen Code's delivery receipts), subclasses `InboxServer` with what its receipts say (`_read`) and what
time settles (`_tick`). Blocking sockets and threads, no asyncio: `crosstalk send` may bind one on its start-up
path; the shim hands receipts to its event loop itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import threading
import time

from crosstalk.fs.procinfo import pid_alive

MAX_RECEIPT_BYTES = 64 * 1024
READ_TIMEOUT_S = 2.0
MAX_CONNECTIONS = 16  # read at once; more are closed unread
TICK_S = 0.5


def peer_of(conn: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process on the other end of a unix socket."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def read_all(conn: socket.socket, max_bytes: int = MAX_RECEIPT_BYTES) -> bytes:
    """What the peer writes until it closes, at most `max_bytes`, waiting at most READ_TIMEOUT_S per read."""
    conn.settimeout(READ_TIMEOUT_S)
    chunks, size = [], 0
    with contextlib.suppress(OSError):
        while size < max_bytes:
            chunk = conn.recv(min(65536, max_bytes - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


def alive(pid: int) -> bool:
    """Whether the session process `pid` still runs; an unknown pid (0) is taken as running."""
    return pid <= 0 or pid_alive(pid)


def prune(directory: str, prefix: str = "") -> None:
    """Remove the inboxes crashed processes left in `directory`: sockets of this user named `<prefix><pid>-…sock`
    for a pid that no longer runs. Nothing else there is touched."""
    try:
        names = os.listdir(directory)[:4096]
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".sock")):
            continue
        pid = name[len(prefix) :].split("-", 1)[0]
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not pid.isdigit() or not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid() or alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)


class InboxServer:
    """A listening socket at `path` (0600) served by a daemon thread: each connection is read by a thread of its own
    (at most MAX_CONNECTIONS at once) through `_read`, and `_tick` runs every TICK_S."""

    def __init__(self, path: str, *, thread_name: str) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(path)
            os.chmod(path, 0o600)
            self._sock.listen(64)
        except OSError:
            self._sock.close()
            raise
        self._sock.settimeout(TICK_S)
        self._cond = threading.Condition()
        self._readers = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.closed = False
        threading.Thread(target=self._serve, name=thread_name, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self._sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def _serve(self) -> None:
        checked = time.monotonic()
        while not self.closed:
            if time.monotonic() - checked >= TICK_S:
                self._tick()
                checked = time.monotonic()
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._readers.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self._serve_one, args=(conn,), daemon=True).start()

    def _serve_one(self, conn: socket.socket) -> None:
        try:
            pid, uid = peer_of(conn)
            if uid == os.geteuid():
                self._read(conn, pid)
        finally:
            conn.close()
            self._readers.release()

    def _read(self, conn: socket.socket, pid: int) -> None:
        """One connection from a process of ours, `pid`: read it (read_all) and apply what it says."""
        raise NotImplementedError

    def _tick(self) -> None:
        """What time settles (a session gone quiet, a window past)."""
        raise NotImplementedError
