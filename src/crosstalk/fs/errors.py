"""The file layer's errors: a lock another process holds, a path that is not a regular file, a config file crosstalk
will not edit. Each message names the path and the problem in one line."""

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
