"""The processes `crosstalk demo` starts, ended by PID: each in its own process group (so the harness's children,
such as its crosstalk MCP shim, go with it), and at the end any process still carrying the demo's own state root in
its environment (a descendant that left its group), found by PID in /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STOP_TIMEOUT_S = 10.0
KILL_TIMEOUT_S = 5.0


class Procs:
    def __init__(self, marker: str) -> None:
        """`marker`: an environment entry (`CROSSTALK_HOME=/tmp/...`) every process of the demo inherits."""
        self.marker = marker.encode()
        self.started: list[subprocess.Popen[Any]] = []

    def spawn(self, argv: list[str], **kw: Any) -> subprocess.Popen[Any]:
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        self.started.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM to its group, SIGKILL after `timeout` s; then the group's leftovers."""
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(KILL_TIMEOUT_S)
        _signal_group(proc.pid, signal.SIGKILL)

    def close(self) -> list[int]:
        """End every process started here, then any straggler with the marker; the PIDs that had to be found."""
        for proc in reversed(self.started):
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in reversed(self.started):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            _signal_group(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(KILL_TIMEOUT_S)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        strays = list(self.strays())
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return strays

    def strays(self) -> Iterator[int]:
        """PIDs (other than this process) whose environment holds the marker."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if self.marker in (entry / "environ").read_bytes().split(b"\0"):
                    yield int(entry.name)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt (as Ctrl-C does), so the caller's cleanup runs for them too."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
