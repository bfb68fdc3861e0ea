"""Crash-safe file writes: a reader sees the old file or the new one, never a partial one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(path: Path) -> None:
    """Make a rename or create in path durable: the directory entry lives in the directory's own blocks."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_name_for(path: Path) -> Path:
    """A hidden sibling named with the writer's pid, so a sweep can tell an abandoned temp file."""
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}{TMP_SUFFIX}")


def temp_writer_pid(name: str) -> int | None:
    """The writer pid encoded by temp_name_for, or None if name is not one of our temp files."""
    if not (name.startswith(".") and name.endswith(TMP_SUFFIX)):
        return None
    parts = name.split(".")
    return int(parts[-3]) if len(parts) >= 4 and parts[-3].isdigit() else None


@contextlib.contextmanager
def synced_temp(path: Path, data: bytes | Iterable[bytes], mode: int) -> Iterator[Path]:
    """A temp file beside path holding `data` (or its chunks, written in turn), synced to disk, exactly `mode` (the
    umask may have narrowed it; readers check the exact mode); removed on exit unless the caller renamed it away."""
    tmp = temp_name_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        try:
            os.fchmod(fd, mode)
            for chunk in [data] if isinstance(data, bytes | bytearray) else data:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        yield tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write(path: Path, data: bytes | Iterable[bytes], *, mode: int = 0o600) -> None:
    """Write data (or its chunks) to path via temp file + fsync + rename + directory fsync; the file ends up exactly
    mode."""
    with synced_temp(path, data, mode) as tmp:
        os.replace(tmp, path)
    fsync_dir(path.parent)
