"""The background dispatcher as a process: start, stop, restart, status, and a systemd user unit. (The daemon's
own side, the loop with its lock and wake socket, is crosstalk.bus.dispatch.daemon; its log is
crosstalk.bus.dispatch.eventlog.)

`server start` spawns `python -m crosstalk daemon dispatch --transport ROOT` in its own session; the daemon
holds dispatcher.lock for life, so the lock (not the pid file) says whether one runs. A pid is only ever
signalled after /proc/<pid>/cmdline shows it is a dispatcher for this transport (pids get reused).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crosstalk.bus.dispatch.eventlog import tail_lines
from crosstalk.bus.errors import ServerError
from crosstalk.bus.transport.state import TransportState, dispatcher_pid, read_json
from crosstalk.bus.transport.transports import Transport
from crosstalk.fs.procinfo import pid_alive
from crosstalk.fs.spawn import CannotLaunch, NotReady, spawn_detached

__all__ = [
    "KILL_WAIT_S",
    "START_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "ServerError",
    "ServerStatus",
    "daemon_argv",
    "install_unit",
    "is_our_dispatcher",
    "start",
    "status",
    "stop",
    "unit_name",
    "unit_path",
    "unit_text",
]

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 15.0
KILL_WAIT_S = 5.0
_POLL_S = 0.05


# ---------------------------------------------------------------------------------------------- the process


def daemon_argv(
    transport: Transport,
    *,
    interval: float | None = None,
    jobs: int | None = None,
    model_timeout: float | None = None,
) -> list[str]:
    argv = [sys.executable, "-m", "crosstalk", "daemon", "dispatch", "--transport", str(transport.root)]
    if interval is not None:
        argv += ["--interval", f"{interval:g}"]
    if jobs is not None:
        argv += ["--jobs", str(jobs)]
    if model_timeout is not None:
        argv += ["--model-timeout", f"{model_timeout:g}"]
    return argv


def is_our_dispatcher(pid: int, transport: Transport) -> bool:
    """Whether pid runs `crosstalk daemon dispatch` for this transport (by its root or its name)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    args = [a.decode("utf-8", errors="replace") for a in raw.split(b"\0") if a]
    if "daemon" not in args or "dispatch" not in args:
        return False
    return str(transport.root) in args or transport.name in args


@dataclass(frozen=True, slots=True)
class ServerStatus:
    transport: str
    root: str
    running: bool
    pid: int | None
    heartbeat: dict[str, object] | None
    heartbeat_age_s: float | None
    log: str

    def to_json(self) -> dict[str, object]:
        return {
            "transport": self.transport,
            "root": self.root,
            "running": self.running,
            "pid": self.pid,
            "heartbeat_age_s": None if self.heartbeat_age_s is None else round(self.heartbeat_age_s, 3),
            "heartbeat": self.heartbeat,
            "log": self.log,
        }


def status(transport: Transport, environ: Mapping[str, str] = os.environ) -> ServerStatus:
    state = transport.state(environ)
    pid = dispatcher_pid(state)
    beat = read_json(state.heartbeat)
    age: float | None = None
    with contextlib.suppress(OSError):
        age = max(0.0, time.time() - state.heartbeat.stat().st_mtime)
    return ServerStatus(
        transport.name,
        str(transport.root),
        pid is not None,
        pid if pid and pid > 0 else None,
        beat if isinstance(beat, dict) else None,
        age,
        str(state.log),
    )


def _started(state: TransportState, pid: int) -> bool:
    beat = read_json(state.heartbeat)
    return dispatcher_pid(state) == pid and isinstance(beat, dict) and beat.get("pid") == pid


def start(
    transport: Transport,
    *,
    interval: float | None = None,
    jobs: int | None = None,
    model_timeout: float | None = None,
    environ: Mapping[str, str] = os.environ,
    timeout: float = START_TIMEOUT_S,
) -> tuple[int, bool]:
    """(pid, started now): spawn the daemon detached and wait until it holds its lock and wrote a heartbeat."""
    state = transport.state(environ).ensure()
    running = dispatcher_pid(state)
    if running is not None:
        return running, False
    argv = daemon_argv(transport, interval=interval, jobs=jobs, model_timeout=model_timeout)
    try:
        pid = spawn_detached(
            argv,
            log=state.log,
            env=environ,
            cwd=str(transport.root),
            ready=lambda started: _started(state, started),
            timeout=timeout,
            poll_s=_POLL_S,
            kill_wait_s=KILL_WAIT_S,
        )
    except CannotLaunch as exc:
        raise ServerError(f"cannot start the dispatcher: {exc.message}") from None
    except NotReady as exc:
        last = " | ".join(line.strip() for line in tail_lines(state.log, 3) if line.strip()) or "no log output"
        raise ServerError(f"the dispatcher for {transport.name} {exc.message}; last log lines: {last}") from None
    return pid, True


def stop(
    transport: Transport, *, environ: Mapping[str, str] = os.environ, timeout: float = STOP_TIMEOUT_S
) -> int | None:
    """SIGTERM the running dispatcher, wait, then SIGKILL; the pid that was stopped, None when none ran."""
    state = transport.state(environ)
    pid = dispatcher_pid(state)
    if pid is None:
        return None
    if pid <= 0:
        raise ServerError(f"a dispatcher for {transport.name} holds its lock but wrote no pid file; stop it by hand")
    if not is_our_dispatcher(pid, transport):
        raise ServerError(
            f"pid {pid} in {state.pidfile} is not a crosstalk dispatcher for {transport.name}; not signalling it"
        )
    os.kill(pid, signal.SIGTERM)
    if _wait_gone(state, pid, timeout):
        return pid
    if is_our_dispatcher(pid, transport):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if not _wait_gone(state, pid, KILL_WAIT_S):
        raise ServerError(f"the dispatcher for {transport.name} (pid {pid}) did not stop")
    return pid


def _wait_gone(state: TransportState, pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid) or dispatcher_pid(state) != pid:
            return True
        time.sleep(_POLL_S)
    return False


# ---------------------------------------------------------------------------------------------- systemd


def unit_name(transport: Transport) -> str:
    return f"crosstalk-{transport.name}.service"


def _quote(arg: str) -> str:
    if arg and not any(ch.isspace() or ch in "\"'\\" for ch in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_text(transport: Transport, environ: Mapping[str, str] = os.environ) -> str:
    """A systemd user unit running this transport's dispatcher (Restart=on-failure)."""
    exec_start = " ".join(_quote(a) for a in daemon_argv(transport))
    env_lines = [
        f"Environment={_quote(f'{key}={environ[key]}')}"
        for key in ("CROSSTALK_HOME", "CROSSTALK_ALIAS", "PATH")
        if environ.get(key)
    ]
    lines = [
        "[Unit]",
        f"Description=crosstalk dispatcher for {transport.name}",
        "",
        "[Service]",
        f"ExecStart={exec_start}",
        f"WorkingDirectory={_quote(str(transport.root))}",
        *env_lines,
        "Restart=on-failure",
        "RestartSec=5",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def unit_path(transport: Transport, environ: Mapping[str, str] = os.environ) -> Path:
    config = environ.get("XDG_CONFIG_HOME")
    base = Path(config) if config and os.path.isabs(config) else Path(environ.get("HOME") or Path.home()) / ".config"
    return base / "systemd" / "user" / unit_name(transport)


def install_unit(transport: Transport, environ: Mapping[str, str] = os.environ) -> Path:
    path = unit_path(transport, environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(unit_text(transport, environ), encoding="utf-8")
    return path
