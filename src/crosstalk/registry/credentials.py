"""The per-agent uds key file: a random token that a client proves it can read (same user, 0600).

Compare tokens with hmac.compare_digest. A token never appears in a descriptor, a listing or a log.
"""

from __future__ import annotations

import os
import stat

from crosstalk.fs.errors import NotRegularFile
from crosstalk.fs.reading import open_regular
from crosstalk.registry.errors import KeyFileError

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from pathlib import Path

KEY_BYTES = 32
MAX_KEY_FILE_BYTES = 4096
KEY_MODE = 0o600


def create_key(path: Path | str) -> str:
    """Write a fresh token to path (0600) and return it; an existing key file of ours is replaced."""
    import secrets  # lazily: only a registering agent needs it, and it pulls in random/hashlib
    from pathlib import Path  # lazily too: `crosstalk send` only reads keys, by their path's string

    from crosstalk.fs.atomic import atomic_write

    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        # Replace only our own regular file; anything else there is not ours to overwrite.
        _check_owned_regular(path, st)
    token = secrets.token_hex(KEY_BYTES)
    # The temp file is created O_EXCL 0600 and renamed over path: a reader never sees an empty or wider file.
    atomic_write(path, (token + "\n").encode("ascii"), mode=KEY_MODE)
    return token


def read_key(path: Path | str) -> str:
    """The token in path; KeyFileError unless path is a non-empty regular file of ours, mode exactly 0600."""
    try:
        st = os.lstat(path)  # lstat: a symlink is refused, not followed
    except FileNotFoundError:
        raise KeyFileError(path, "does not exist") from None
    except OSError as e:
        raise KeyFileError(path, f"cannot be examined ({e.strerror})") from None
    _check_key_stat(path, st)  # before open: opening a FIFO would block
    try:
        fd = open_regular(path)
    except NotRegularFile as e:
        raise KeyFileError(path, f"is {e.what}, not a regular file") from None
    except OSError as e:
        raise KeyFileError(path, f"cannot be opened ({e.strerror})") from None
    try:
        _check_key_stat(path, os.fstat(fd))  # the file we opened, not whatever the path named a moment ago
        data = os.read(fd, MAX_KEY_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(path, f"is larger than {MAX_KEY_FILE_BYTES} bytes")
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise KeyFileError(path, "is not ASCII text") from None
    if not token:
        raise KeyFileError(path, "is empty")
    return token


def remove_key(path: Path | str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _check_owned_regular(path: Path | str, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise KeyFileError(path, "is a symlink; refusing to follow it")
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(path, "is not a regular file")
    uid = os.geteuid()
    if st.st_uid != uid:
        raise KeyFileError(path, f"is owned by uid {st.st_uid}, not by you (uid {uid})")


def _check_key_stat(path: Path | str, st: os.stat_result) -> None:
    _check_owned_regular(path, st)
    mode = stat.S_IMODE(st.st_mode)
    if mode != KEY_MODE:
        raise KeyFileError(path, f"has mode {mode:04o}; it must be exactly {KEY_MODE:04o}")
