"""Starting and stopping this state root's relay process (`crosstalk relay join`, `relay leave`), as `crosstalk
server start` does for the bus dispatcher: `relay serve` detached in its own session, its output appended to
relay/serve.log, and `start` returns once the process holds its lock (the lock, not a pid file, says whether one
runs). `stop` signals the process the status names, checked to be that process (pid and start time), and waits for
its lock to come free.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from crosstalk.fs.locks import is_locked
from crosstalk.fs.procinfo import is_same_process
from crosstalk.fs.spawn import CannotLaunch, NotReady, spawn_detached
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
    try:
        pid = spawn_detached(
            [sys.executable, "-m", "crosstalk", "relay", "serve"],
            log=log,
            env={**environ, "CROSSTALK_HOME": str(paths.root)},
            cwd="/",
            ready=lambda started: running_pid(paths) == started,
            timeout=START_TIMEOUT_S,
            poll_s=POLL_S,
            kill_wait_s=STOP_TIMEOUT_S,
            log_nofollow=True,
        )
    except CannotLaunch as exc:
        raise RelayConfigError(f"cannot start the relay process: {exc.message}") from None
    except NotReady:
        raise RelayConfigError(f"the relay process did not start: {_tail(log) or 'no output'} (log: {log})") from None
    return pid, True


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
