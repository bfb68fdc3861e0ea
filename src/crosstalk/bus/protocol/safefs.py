"""Reading files and YAML that anyone who can push to a transport controls.

Guarantees of read_transport_bytes: the file is a regular file inside the transport; no path component (directory
or file) is followed through a symlink (each one is opened with O_NOFOLLOW relative to its parent's descriptor,
starting from the transport root); a FIFO or device never blocks the reader; at most `limit` bytes are ever read.
Any breach raises UnsafeFile naming the transport-relative path. A missing file raises FileNotFoundError.

Guarantee of load_yaml: a document with an alias (`*name`) or more than MAX_YAML_NODES nodes is refused before it
is built, so a few hundred bytes cannot expand into gigabytes; what is built is checked by the one rule for untrusted
input (crosstalk.core.untrusted.check_depth), and a loader that recursed too deep is that rule's UntrustedInput too.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

import yaml

from crosstalk.bus.errors import UnsafeFile
from crosstalk.core.errors import UntrustedInput
from crosstalk.core.untrusted import MAX_DEPTH, check_depth
from crosstalk.fs.reading import read_fd_capped

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseLoader: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)

MESSAGE_LIMIT = 2 << 20  # a message body may be 1 MiB (message.MAX_BODY_BYTES) plus its front matter
TEXT_LIMIT = 256 << 10  # PROTOCOL.md, personas, data/crosstalk.yaml, CHANNEL.md
SMALL_LIMIT = 64 << 10  # CROSSTALK-VERSION, env files
MAX_YAML_NODES = 10_000
MAX_YAML_CHARS = 1 << 20

_DIR_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY | os.O_NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


def _open_component(name: str, flags: int, parent: int, rel: str, shown: str) -> int:
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            try:
                link = stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
            except OSError:
                link = False
            what = "is a symlink" if link else "is not a directory"
            raise UnsafeFile(f"{rel}: {shown} {what} (refused: the bus never follows symlinks)") from None
        raise


def _open_regular(root: os.PathLike[str] | str, rel: str) -> tuple[int, os.stat_result]:
    """(descriptor, fstat) of the regular file `rel` under `root`, every component opened without following."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in rel:
        raise UnsafeFile(f"{rel!r}: not a plain path inside the transport")
    fd = os.open(root, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
    try:
        for depth, part in enumerate(parts[:-1], start=1):
            child = _open_component(part, _DIR_FLAGS, fd, rel, "/".join(parts[:depth]))
            os.close(fd)
            fd = child
        file_fd = _open_component(parts[-1], _FILE_FLAGS, fd, rel, rel)
    finally:
        os.close(fd)
    try:
        info = os.fstat(file_fd)
    except OSError:
        os.close(file_fd)
        raise
    if not stat.S_ISREG(info.st_mode):
        os.close(file_fd)
        raise UnsafeFile(f"{rel}: not a regular file (refused)")
    return file_fd, info


def read_transport_bytes(root: os.PathLike[str] | str, rel: str, limit: int) -> bytes:
    """The bytes of `rel` (transport-relative, "/"-separated) under `root`, read as the module docstring says."""
    file_fd, info = _open_regular(root, rel)
    try:
        if info.st_size > limit:
            raise UnsafeFile(f"{rel}: {info.st_size} bytes is over the {limit}-byte limit (refused)")
        data = read_fd_capped(file_fd, limit)
    finally:
        os.close(file_fd)
    if data is None:
        raise UnsafeFile(f"{rel}: over the {limit}-byte limit (refused)")
    return data


def read_transport_text(root: os.PathLike[str] | str, rel: str, limit: int, *, errors: str = "strict") -> str:
    """read_transport_bytes decoded as UTF-8 (UnicodeDecodeError with errors="strict")."""
    return read_transport_bytes(root, rel, limit).decode("utf-8", errors=errors)


def is_regular_in(root: os.PathLike[str] | str, rel: str) -> bool:
    """Whether `rel` is a regular file inside the transport reached without any symlink (it is not read)."""
    try:
        fd, _ = _open_regular(root, rel)
    except (OSError, UnsafeFile):
        return False
    os.close(fd)
    return True


def check_yaml(text: str, where: str) -> None:
    """Raise yaml.YAMLError when the document has an alias, more than MAX_YAML_NODES nodes or characters."""
    if len(text) > MAX_YAML_CHARS:
        raise yaml.YAMLError(f"{where}: the YAML is over {MAX_YAML_CHARS} characters")
    nodes = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.YAMLError(f"{where}: YAML aliases (*name) are not allowed")
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_YAML_NODES:
                raise yaml.YAMLError(f"{where}: the YAML has more than {MAX_YAML_NODES} nodes")


def load_yaml(text: str, where: str, *, strings_only: bool = False) -> Any:
    """The YAML document in `text` after check_yaml; `strings_only` keeps every scalar a string (no dates, no
    numbers: the lenient reading of a broken file). Raises yaml.YAMLError, UntrustedInput (a ValueError: nested
    deeper than core.untrusted allows), or ValueError/TypeError from a scalar that cannot be built (an impossible
    date such as 2026-13-45)."""
    check_yaml(text, where)
    try:
        value = yaml.load(text, Loader=_BaseLoader if strings_only else _Loader)
    except RecursionError:  # the pure-Python loader (no libyaml) recurses once per level
        raise UntrustedInput(where, f"nested deeper than {MAX_DEPTH} levels") from None
    return check_depth(value, what=where)
