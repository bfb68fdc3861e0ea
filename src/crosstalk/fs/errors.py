"""The file layer's errors: a lock another process holds, a path that is not a regular file, a config file crosstalk
will not edit, a background process that would not start (fs/spawn.py). Each message names the path and the problem
in one line."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from pathlib import Path


class LockHeld(CrosstalkError):
    """`with FileLock(path)` found the lock taken by another open file."""

    def __init__(self, path: object) -> None:
        super().__init__(f"lock {path} is held by another open file (a live process)")
        self.path = path


class NotRegularFile(CrosstalkError, OSError):
    """The path names something other than a regular file (a FIFO, a device, a directory, a symlink): refused, one
    line naming the path and what it is. An OSError, so a caller that treats "cannot open" as "absent" still does."""

    def __init__(self, path: object, what: str) -> None:
        super().__init__(f"{path} is {what}, not a regular file; refusing to open it (remove it, then try again)")
        self.path = path
        self.what = what


class ConfigRefused(CrosstalkError, ValueError):
    """A config file crosstalk will not read or write; the message names the file and the exact reason."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}; nothing was changed")
        self.path = str(path)
        self.reason = reason


class CannotLaunch(CrosstalkError):
    """The process could not be executed at all; the message is the OS's reason (its strerror)."""


class NotReady(CrosstalkError):
    """The process exited (`exited` is its status) or was not ready within the timeout (`exited` None; it was killed
    with its process group). The caller words the error, usually with its log's last lines."""

    def __init__(self, exited: int | None, timeout: float) -> None:
        why = f"exited with {exited}" if exited is not None else f"did not come up within {timeout:g} s"
        super().__init__(why)
        self.exited = exited
        self.timeout = timeout
