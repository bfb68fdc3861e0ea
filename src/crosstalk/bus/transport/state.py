"""Machine-local bus state under the crosstalk state root: the transports registry dir and, per transport, the
dispatcher's cursor, heartbeat, pid file, lock, log and wake socket. None of it is ever committed."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crosstalk.bus.errors import BusError
from crosstalk.core.errors import UntrustedInput
from crosstalk.core.untrusted import loads
from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.locks import is_locked
from crosstalk.registry import paths as registry_paths
from crosstalk.registry.errors import RegistryError
from crosstalk.registry.paths import MAX_SOCKET_PATH_BYTES, StatePaths

WAKE_BYTE = b"w"
PUSHED_BYTE = b"p"  # the poke of a writer that pushed: the dispatcher tells the other machines (relay wake)


def bus_root(environ: Mapping[str, str] = os.environ) -> Path:
    """$CROSSTALK_HOME/bus (or the XDG default)."""
    return StatePaths.from_env(environ).root / "bus"


def transports_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return bus_root(environ) / "transports"


def ensure_private_dir(path: Path) -> Path:
    """Create path and every missing directory above it 0700 (mkdir(parents=True) would leave those at the umask's
    0755: the state root itself, when the bus is the first to need it), or check and tighten an existing `path`
    (registry.paths's rule: a directory, owned by this user); a problem is a BusError, printed on one line."""
    try:
        for missing in [d for d in reversed(path.parents) if not d.exists()]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(missing, 0o700)
        registry_paths.ensure_private_dir(path)
    except RegistryError as exc:
        raise BusError(str(exc)) from None
    return path


@dataclass(frozen=True, slots=True)
class TransportState:
    """Where one transport's dispatcher keeps its machine-local state: bus/state/<name>/."""

    name: str
    dir: Path

    @property
    def cursor(self) -> Path:
        return self.dir / "cursor"

    @property
    def heartbeat(self) -> Path:
        return self.dir / "heartbeat.json"

    @property
    def pidfile(self) -> Path:
        return self.dir / "dispatcher.pid"

    @property
    def lock(self) -> Path:
        return self.dir / "dispatcher.lock"

    @property
    def log(self) -> Path:
        return self.dir / "dispatcher.log"

    @property
    def wake_sock(self) -> Path:
        return self.dir / "wake.sock"

    @property
    def held(self) -> Path:
        """Bus messages held for live agents here that are down (bus/live/held.py)."""
        return self.dir / "held.json"

    @property
    def orphans(self) -> Path:
        """Where files a crashed writer left uncommitted under data/channels are moved (bus/transport/store.py)."""
        return self.dir / "orphans"

    def ensure(self) -> TransportState:
        """Create the directory 0700 and fail early if the wake socket path cannot fit AF_UNIX."""
        try:
            registry_paths.check_socket_path(self.wake_sock)
        except RegistryError as exc:
            raise BusError(str(exc)) from None
        ensure_private_dir(self.dir)
        return self


def transport_state(name: str, environ: Mapping[str, str] = os.environ) -> TransportState:
    return TransportState(name, bus_root(environ) / "state" / name)


# ---------------------------------------------------------------------------------------------- small files


def write_text_atomic(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Readers see the old content or the new, never a torn write."""
    atomic_write(path, text.encode("utf-8"), mode=mode)


def write_json_atomic(path: Path, data: Any, *, mode: int = 0o600) -> None:
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n", mode=mode)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


MAX_STATE_JSON_BYTES = 16 << 20  # heartbeat, workflows.json, held.json, a transport's registration


def read_json(path: Path) -> Any | None:
    """The parsed file, or None when it is missing or not JSON (a reader never fails on a half-made file), or
    breaks the one rule for untrusted input (too large, too deep: crosstalk.core.untrusted)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_STATE_JSON_BYTES + 1)
    except FileNotFoundError:
        return None
    try:
        return loads(data, what=str(path), max_bytes=MAX_STATE_JSON_BYTES)
    except UntrustedInput:
        return None


def read_cursor(state: TransportState) -> str | None:
    text = read_text(state.cursor)
    sha = text.strip() if text else ""
    return sha or None


def write_cursor(state: TransportState, sha: str) -> None:
    state.ensure()
    write_text_atomic(state.cursor, sha + "\n")


def read_pid(state: TransportState) -> int | None:
    text = read_text(state.pidfile)
    try:
        return int(text.strip()) if text else None
    except ValueError:
        return None


def dispatcher_pid(state: TransportState) -> int | None:
    """The pid of this machine's live dispatcher for the transport, -1 when it wrote no pid file, or None.

    The daemon holds flock on dispatcher.lock for its whole life, so the lock (not the pid file, whose pid may
    have been reused) is the truth; the pid file only says which process it is."""
    if not is_locked(state.lock):
        return None
    pid = read_pid(state)
    return pid if pid is not None else -1


def wake(name: str, environ: Mapping[str, str] = os.environ, *, pushed: bool = False) -> bool:
    """Poke this machine's dispatcher for transport name; False (never an error) when none is listening. `pushed`:
    the writer pushed a commit, so a dispatcher joined to a relay wakes the other machines."""
    path = transport_state(name, environ).wake_sock
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        return False
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)) as sock:
        sock.setblocking(False)
        try:
            sock.sendto(PUSHED_BYTE if pushed else WAKE_BYTE, os.fsencode(path))
        except OSError as exc:
            # Absent socket, a dead daemon's leftover, or a full queue (it is already awake): all fine.
            if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN, errno.ENOTSOCK, errno.EACCES):
                return False
            return exc.errno == errno.EAGAIN
    return True
