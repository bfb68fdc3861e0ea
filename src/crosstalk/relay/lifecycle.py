"""Starting and stopping this state root's relay process (`crosstalk relay join`, `relay leave`), as `crosstalk
server start` does for the bus dispatcher: `relay serve` detached in its own session, its output appended to
relay/serve.log, and `start` returns once the process holds its lock (the lock, not a pid file, says whether one
runs). `stop` signals the process the status names, checked to be that process (pid and start time), and waits for
its lock to come free.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from crosstalk.fs.locks import is_locked
from crosstalk.fs.procinfo import is_same_process
from crosstalk.registry.paths import StatePaths, ensure_private_dir
from crosstalk.relay.config import relay_dir, serve_lock_path
from crosstalk.relay.errors import RelayConfigError
from crosstalk.relay.serve import read_status

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.02
LOG_TAIL_BYTES = 2000


def log_path(paths: StatePaths) -> Path:
    return relay_dir(paths) / "serve.log"


def running_pid(paths: StatePaths) -> int | None:
    status = read_status(paths)
    pid = status.get("pid") if status else None
    return pid if isinstance(pid, int) else None


def start(paths: StatePaths, environ: Mapping[str, str] = os.environ) -> tuple[int, bool]:
    """(pid, started now). Raises RelayConfigError with the log's last words when the process does not come up."""
    pid = running_pid(paths)
    if pid is not None:
        return pid, False
    ensure_private_dir(relay_dir(paths))
    log = log_path(paths)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    env = {**environ, "CROSSTALK_HOME": str(paths.root)}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "crosstalk", "relay", "serve"],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=env,
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise RelayConfigError(f"cannot start the relay process: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if running_pid(paths) == proc.pid:
            proc.returncode = 0  # detached on purpose: nobody waits for it, and Popen must not warn about that
            return proc.pid, True
        if proc.poll() is not None:
            break
        time.sleep(POLL_S)
    if proc.poll() is None:
        proc.kill()
        proc.wait(STOP_TIMEOUT_S)
    raise RelayConfigError(f"the relay process did not start: {_tail(log) or 'no output'} (log: {log})")


def stop(paths: StatePaths) -> int | None:
    """SIGTERM the process serving this state root and wait for its lock to come free. Its pid, or None when none
    ran. RelayConfigError when it does not stop in time."""
    serving = read_status(paths)
    if serving is None:
        return None
    pid = serving.get("pid")
    if not isinstance(pid, int) or not is_same_process(pid, serving.get("pid_started")):
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and is_locked(serve_lock_path(paths)):
        time.sleep(POLL_S)
    if is_locked(serve_lock_path(paths)):
        raise RelayConfigError(f"relay process {pid} did not stop within {STOP_TIMEOUT_S:g} s")
    return pid


def _tail(log: Path) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - LOG_TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""
