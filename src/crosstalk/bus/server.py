"""The background dispatcher as a process: start, stop, restart, status, its log, and a systemd user unit.

`server start` spawns `python -m crosstalk daemon dispatch --transport ROOT` in its own session; the daemon
holds dispatcher.lock for life, so the lock (not the pid file) says whether one runs. A pid is only ever
signalled after /proc/<pid>/cmdline shows it is a dispatcher for this transport (pids get reused).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from crosstalk.bus.errors import BusError
from crosstalk.bus.message import utc_timestamp
from crosstalk.bus.state import TransportState, dispatcher_pid, pid_alive, read_json, read_pid, write_text_atomic
from crosstalk.bus.transports import Transport

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 15.0
KILL_WAIT_S = 5.0
_POLL_S = 0.05
_MAX_VALUE_CHARS = 2000


class ServerError(BusError):
    """The dispatcher could not be started or stopped."""


class AlreadyRunning(BusError):
    """Another live dispatcher holds this transport's dispatcher.lock on this machine."""


# ---------------------------------------------------------------------------------------------- the event log


def _field(value: object) -> str:
    text = "-" if value is None else str(value)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 1] + "…"
    if not text or any(ch.isspace() or ch in "\"=" for ch in text):
        return json.dumps(text, ensure_ascii=False)
    return text


class EventLog:
    """One line per event, `<iso time> <level> <event> key=value ...`, appended to the log file and/or a stream.
    Values with spaces or quotes are JSON-quoted so a line always splits back into its fields."""

    def __init__(self, path: Path | None, *, stream: TextIO | None = None) -> None:
        self.path = path
        self.stream = stream
        self._lock = threading.Lock()

    def __call__(self, event: str, level: str = "info", **fields: object) -> None:
        parts = [utc_timestamp(), level, event, *(f"{key}={_field(value)}" for key, value in fields.items())]
        line = " ".join(parts) + "\n"
        with self._lock:
            if self.path is not None:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    os.write(fd, line.encode("utf-8", errors="replace"))
                finally:
                    os.close(fd)
            if self.stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.stream.write(line)
                    self.stream.flush()


def same_file(stream: TextIO, path: Path) -> bool:
    """Whether stream writes into path (the daemon spawned by `server start` has stderr appended to its log)."""
    try:
        a, b = os.fstat(stream.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def tail_lines(path: Path, count: int) -> list[str]:
    """The last `count` lines of the log (reads at most the last few MiB)."""
    if count <= 0:
        return []
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 4 * 1024 * 1024))
            data = fh.read()
    except FileNotFoundError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[-count:]


def follow(path: Path, *, duration: float | None = None, stop: threading.Event | None = None) -> Iterator[str]:
    """New lines appended to the log, until `duration` seconds pass or `stop` is set (a truncation restarts)."""
    deadline = None if duration is None else time.monotonic() + duration
    offset = path.stat().st_size if path.exists() else 0
    partial = b""
    while (deadline is None or time.monotonic() < deadline) and not (stop and stop.is_set()):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < offset:
            offset, partial = 0, b""
        if size > offset:
            with open(path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read(size - offset)
            offset += len(chunk)
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                yield line.decode("utf-8", errors="replace")
            continue
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------------- inside the daemon


def hold_dispatcher_lock(state: TransportState, name: str) -> int:
    """Take dispatcher.lock for the daemon's life (the fd; closing it releases) and write the pid file."""
    fd = os.open(state.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        pid = read_pid(state)
        raise AlreadyRunning(f"a dispatcher for transport {name} is already running (pid {pid or 'unknown'})") from None
    write_text_atomic(state.pidfile, f"{os.getpid()}\n", mode=0o644)
    return fd


def bind_wake_socket(state: TransportState) -> socket.socket:
    """Bind wake.sock (AF_UNIX datagrams, 0600) non-blocking; the caller holds dispatcher.lock."""
    path = state.wake_sock
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead dispatcher's leftover; we hold the lock, so no live one owns it
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    old = os.umask(0o177)
    try:
        sock.bind(os.fsencode(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.setblocking(False)
    return sock


def drain(sock: socket.socket) -> None:
    """Consume pending wake datagrams: the tick about to run covers everything sent before it."""
    for _ in range(100000):
        try:
            sock.recv(64)
        except (BlockingIOError, InterruptedError):
            return


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
    log_fd = os.open(state.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            cwd=str(transport.root),
            env=dict(environ),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise ServerError(f"cannot start the dispatcher: {exc.strerror or exc}") from None
    finally:
        os.close(log_fd)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _started(state, proc.pid):
            proc.returncode = 0  # detached on purpose: nobody waits for it, and Popen must not warn about that
            return proc.pid, True
        if proc.poll() is not None:
            break
        time.sleep(_POLL_S)
    exited = proc.poll()
    if exited is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=KILL_WAIT_S)
    last = " | ".join(line.strip() for line in tail_lines(state.log, 3) if line.strip()) or "no log output"
    why = f"exited with {exited}" if exited is not None else f"did not come up within {timeout:g} s"
    raise ServerError(f"the dispatcher for {transport.name} {why}; last log lines: {last}")


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
        raise ServerError(f"pid {pid} in {state.pidfile} is not a crosstalk dispatcher for {transport.name}; not "
                          "signalling it")
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
