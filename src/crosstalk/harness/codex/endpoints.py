"""Where a Codex thread may be loaded: the app-server sockets crosstalk asks.

1. The control socket under CODEX_HOME (`app-server-control/app-server-control.sock`), where the interactive `codex`
   and `codex app-server --listen unix://` serve. Always asked: when it is missing, that is the reason given.
2. The socket the shim's own parent, an app-server, listens on (`--listen unix://PATH`, read from its command line),
   and the control socket under the CODEX_HOME the parent was started with: Codex hands its MCP children only a few
   variables, so an entry without the user's CODEX_HOME still finds the user's app-server.
3. The endpoints other live Codex agents are bound to, as their descriptors record them (the host passes them in).

Every endpoint is connected to only when it is a unix socket owned by this user, not reached through a symlink
(own_socket: listings and the adapter alike; a descriptor is ours, but the file it names may have been replaced
since). 2 and 3 are left out of the list otherwise. Duplicates (the same socket by another path) are asked once.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from crosstalk.fs.procinfo import process_environ
from crosstalk.fs.reading import read_capped

MAX_CMDLINE = 64 * 1024
# How every client of an app-server (appserver.py's, asyncio; threads.py's, blocking) names itself and bounds a frame.
# Here, where both find it: threads.py discovers on `crosstalk send`'s path, which must not import asyncio.
MAX_FRAME = 16 * 1024 * 1024
CLIENT = {"name": "crosstalk", "title": None, "version": "1"}


def codex_home(environ: Mapping[str, str]) -> Path:
    """$CODEX_HOME, else ~/.codex. Here, not in install.py: discovery reads it, and install.py imports tomlkit."""
    value = environ.get("CODEX_HOME")
    if value:
        return Path(value).expanduser()
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".codex"


def control_socket(environ: Mapping[str, str]) -> Path:
    return codex_home(environ) / "app-server-control" / "app-server-control.sock"


def parent_listen_socket(pid: int | None = None) -> str | None:
    """The unix socket the app-server that started this process listens on (`--listen unix://PATH`), if it is one
    and names a path (plain `unix://` is the control socket)."""
    raw = read_capped(f"/proc/{os.getppid() if pid is None else pid}/cmdline", MAX_CMDLINE)
    args = raw.decode(errors="replace").split("\0") if raw else []
    if "app-server" not in args:
        return None
    for i, arg in enumerate(args):
        value = args[i + 1] if arg == "--listen" and i + 1 < len(args) else None
        if arg.startswith("--listen="):
            value = arg.split("=", 1)[1]
        if value and value.startswith("unix://") and len(value) > len("unix://"):
            return value[len("unix://") :]
    return None


def parent_control_socket(pid: int | None = None) -> str | None:
    """The control socket under the CODEX_HOME (or HOME) the parent process was started with."""
    env = process_environ(os.getppid() if pid is None else pid)
    if env is None or not (env.get("CODEX_HOME") or env.get("HOME")):
        return None
    return str(control_socket(env))


def own_socket(path: str) -> bool:
    """An absolute path to a unix socket this user owns: the one check made before anything connects to an
    app-server socket, to list threads or to write a message into one."""
    return socket_problem(path) is None


def socket_problem(path: str) -> str | None:
    """Why `path` is not an app-server socket crosstalk may connect to (None when it is: own_socket).

    Codex itself makes the control socket a symlink (into /tmp/codex-daemon-<uid>/), so a link is followed as
    connecting follows it, but only a link this user owns, to a socket this user owns."""
    if not os.path.isabs(path):
        return f"{path} is not an absolute path"
    try:
        link, st = os.lstat(path), os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a unix socket"
    for what, owner in (("is a symlink owned", link.st_uid), ("is owned", st.st_uid)):
        if owner != os.geteuid():
            return f"{path} {what} by uid {owner}, not by you (uid {os.geteuid()}); refusing to connect"
    return None


def endpoints(environ: Mapping[str, str], known: Iterable[str] = (), *, parent: bool = True) -> list[str]:
    """The sockets to ask, in order: the control socket, the shim's parent's (`parent`), then `known`."""
    found = [str(control_socket(environ))]
    seen = {os.path.realpath(found[0])}
    extra = [parent_listen_socket(), parent_control_socket()] if parent else []
    for path in [*extra, *known]:
        if not path or not own_socket(path):
            continue
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            found.append(path)
    return found
