"""Editing a config file that its own program also rewrites (Claude Code writes `~/.claude.json` many times a
minute): read it refusing anything but a plain file, with the exact reason (read_config), and replace it so that a
write the other program made meanwhile is never lost (update).

update is optimistic: read the file, compute the new bytes from them, write a temp file, and rename it over the file
only if the file is still exactly what was read (same inode, size, mtime and bytes); otherwise start again from the
new bytes. After the rename the file is read again: when the other program replaced it from a copy read before ours
landed, our change is made again. The window between the last check and the rename is a few microseconds; a program
that takes a lock around its own writes closes it when the caller takes the same lock (`lock`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from crosstalk.core.errors import UntrustedInput
from crosstalk.core.untrusted import loads
from crosstalk.fs.atomic import fsync_dir, synced_temp
from crosstalk.fs.errors import ConfigRefused
from crosstalk.fs.reading import describe_mode, read_fd_capped

ATTEMPTS = 200
Edit = Callable[[bytes | None], bytes | None]  # the file's bytes (None: absent) -> new bytes (None: delete it)


def _refuse_kind(path: Path | str, st: os.stat_result, limit: int) -> None:
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        raise ConfigRefused(path, f"is a symlink (to {target}); crosstalk edits only a regular file")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigRefused(path, f"is {describe_mode(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise ConfigRefused(path, f"is {st.st_size} bytes, over the {limit}-byte limit for a config file")


def _snapshot(path: Path | str, limit: int) -> tuple[bytes | None, tuple[int, ...] | None]:
    """(bytes, identity) of the file, (None, None) when it is absent; ConfigRefused says exactly why it cannot be."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        try:
            _refuse_kind(path, os.lstat(path), limit)
        except FileNotFoundError:
            return None, None
        raise ConfigRefused(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        _refuse_kind(path, st, limit)
        data = read_fd_capped(fd, limit)
        if data is None:
            raise ConfigRefused(path, f"is over the {limit}-byte limit for a config file")
    except OSError as exc:
        raise ConfigRefused(path, f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return data, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def read_config(path: Path | str, limit: int) -> bytes | None:
    """The file's bytes, None when it does not exist; ConfigRefused naming the reason when it is a symlink, not a
    regular file, over `limit` bytes, or unreadable."""
    return _snapshot(path, limit)[0]


def update(
    path: Path,
    edit: Edit,
    *,
    limit: int,
    new_mode: int = 0o600,
    lock: Callable[[], AbstractContextManager[object]] | None = None,
    attempts: int = ATTEMPTS,
) -> tuple[bytes | None, bytes | None]:
    """Replace the file with edit(its bytes), losing no write another program makes meanwhile (module docstring).
    edit returning the bytes it was given writes nothing; returning None deletes the file. Returns (the bytes first
    read, the bytes written). Exceptions from edit propagate with nothing written; ConfigRefused when the file is
    not a plain file or kept changing for `attempts` tries."""
    first: bytes | None = None
    for attempt in range(attempts):
        with lock() if lock is not None else contextlib.nullcontext():
            before, ident = _snapshot(path, limit)
            first = before if attempt == 0 else first
            after = edit(before)
            if after == before:
                return first, after
            if not _swap(path, after, before, ident, limit, new_mode):
                continue
            now, _ = _snapshot(path, limit)
            # Our bytes are there, or a later write kept our change: done. Else that write dropped it: again.
            if now == after or (now is not None and after is not None and edit(now) == now):
                return first, after
    raise ConfigRefused(path, f"kept changing while crosstalk edited it ({attempts} tries); try again")


def _swap(path: Path, data: bytes | None, before: bytes | None, ident: object, limit: int, new_mode: int) -> bool:
    """Put `data` (None: no file) at path if the file is still `before` with identity `ident`; False if it is not."""
    if data is None:
        if _snapshot(path, limit) != (before, ident):
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        fsync_dir(path.parent)
        return True
    mode = stat.S_IMODE(os.stat(path).st_mode) if before is not None else new_mode
    path.parent.mkdir(parents=True, exist_ok=True)
    with synced_temp(path, data, mode) as tmp:
        if _snapshot(path, limit) != (before, ident):
            return False
        os.replace(tmp, path)
    fsync_dir(path.parent)
    return True


def json_object(path: Path | str, raw: bytes | None, limit: int) -> dict[str, Any]:
    """The JSON object a config file holds ({} when it is absent or blank), parsed as untrusted input (bounded in
    size and depth); ConfigRefused naming the file when it is not JSON or not an object."""
    if raw is None or not raw.strip():
        return {}
    try:
        data = loads(raw, what=str(path), max_bytes=limit)
    except UntrustedInput as exc:
        raise ConfigRefused(path, f"{exc.problem}; fix it, then try again") from None
    if not isinstance(data, dict):
        raise ConfigRefused(path, "is not a JSON object; fix it, then try again")
    return data


def json_bytes(data: dict[str, Any]) -> bytes:
    """A JSON config file's bytes as Claude Code and pi write theirs: two-space indent, UTF-8, a final newline."""
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()
