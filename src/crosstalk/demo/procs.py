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
EXEC_SETTLE_S = 1.0  # how long a process seen mid-exec (an empty environment) is read again
PROC = Path("/proc")
PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread


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
        """PIDs (other than this process) whose environment holds the marker. A process in the middle of an exec
        shows an empty environment for a moment (its parent's fork returns before the new program's environment is
        set up: vfork resumes the parent at the exec, not after it), so one read empty is read again, for up to
        EXEC_SETTLE_S: a descendant started just before the end is not missed."""
        unsettled: list[Path] = []
        for entry in PROC.iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            environ = _environ(entry)
            if environ == b"" and _mid_exec(entry):
                unsettled.append(entry)
            elif environ is not None and self.marker in environ.split(b"\0"):
                yield int(entry.name)
        deadline = time.monotonic() + EXEC_SETTLE_S
        while unsettled:
            time.sleep(0.01)
            still = []
            for entry in unsettled:
                environ = _environ(entry)
                if environ is not None and self.marker in environ.split(b"\0"):
                    yield int(entry.name)
                elif environ == b"" and _mid_exec(entry) and time.monotonic() < deadline:
                    still.append(entry)
            unsettled = still


def _environ(entry: Path) -> bytes | None:
    """The process's environment block; None when it cannot be read (gone, or not ours)."""
    try:
        return (entry / "environ").read_bytes()
    except OSError:
        return None


def _mid_exec(entry: Path) -> bool:
    """An empty environment that may yet fill: a live user process (not a zombie, not a kernel thread, whose
    environment is empty for good)."""
    try:
        fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] not in ("Z", "X") and not int(fields[6]) & PF_KTHREAD


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
