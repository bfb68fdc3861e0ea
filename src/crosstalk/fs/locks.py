"""flock(2) locks whose holder is, by construction, a live process: the kernel drops them when it dies.

flock is per open file description, so two FileLock objects on one path conflict even inside one process.
Lock files are never unlinked: a later opener of a recreated path would lock another inode than the holder.
Lock files are opened by fs.reading.open_regular: a FIFO, a device, a directory or a symlink planted under a lock's
name is refused at once (NotRegularFile, an OSError naming it), never waited on.
"""

from __future__ import annotations

import fcntl
import os
import time

from crosstalk.fs.errors import LockHeld
from crosstalk.fs.reading import open_regular

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType

_POLL_SECONDS = 0.002


class FileLock:
    def __init__(self, path: Path | str) -> None:
        from pathlib import Path  # here: is_locked (on `crosstalk send`'s path) needs no pathlib

        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self, grace: float = 0.0) -> bool:
        """Take the lock without blocking; with grace, retry for that many seconds.

        grace rides out brief probes: is_locked() and sweeps hold a lock for microseconds, which must not look
        like a live owner to a registration.
        """
        if self._fd is not None:
            return True
        deadline = time.monotonic() + grace
        while True:
            fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL_SECONDS)
                continue
            except BaseException:
                os.close(fd)
                raise
            if _same_inode(fd, self.path):
                self._fd = fd
                return True
            # Someone replaced the file between our open and flock: a lock on the orphan inode guards nothing.
            os.close(fd)

    def acquire(self, timeout: float) -> bool:
        """Take the lock, waiting in the kernel's queue for at most `timeout` seconds; whether it was taken.

        Unlike try_acquire's polling, a blocked flock is woken the moment the holder lets go, so a process that
        releases and relocks in a loop cannot starve this waiter. The blocking call runs in a daemon thread; if
        the wait times out, that thread lets the lock go as soon as it gets it.
        """
        if self.try_acquire():
            return True
        deadline = time.monotonic() + timeout
        while True:
            fd = _wait_for_flock(self.path, deadline - time.monotonic())
            if fd is None:
                return False
            if _same_inode(fd, self.path):
                self._fd = fd
                return True
            os.close(fd)  # the file was replaced while we waited: lock the new one

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> FileLock:
        if not self.try_acquire():
            raise LockHeld(self.path)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"FileLock({str(self.path)!r}, held={self.held})"


def _wait_for_flock(path: Path, timeout: float) -> int | None:
    """An fd holding path's exclusive flock, taken by a blocking flock within `timeout`; None on timeout."""
    import threading  # only a contended wait needs it; `crosstalk send` imports this module

    fd = open_regular(path, os.O_RDWR | os.O_CREAT, 0o600)
    done = threading.Event()
    state: dict[str, object] = {"abandoned": False, "error": None}
    guard = threading.Lock()

    def wait() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            state["error"] = exc
        with guard:
            if state["abandoned"] or state["error"] is not None:
                os.close(fd)  # also drops the lock if it was taken after the caller gave up
            done.set()

    threading.Thread(target=wait, name=f"flock {path.name}", daemon=True).start()
    done.wait(max(0.0, timeout))
    with guard:
        if not done.is_set():
            state["abandoned"] = True
            return None
    error = state["error"]
    if isinstance(error, OSError):
        raise error
    return fd


def _same_inode(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def is_locked(path: Path | str) -> bool:
    """True when some open file holds path's lock; never creates the file (absent means unlocked). NotRegularFile
    when something else is planted there."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a shared probe never blocks another prober
        except BlockingIOError:
            return True
        return False  # closing the fd drops the shared lock at once
    finally:
        os.close(fd)
