"""Starting a long-lived crosstalk process in the background, the one way `crosstalk server start` (the bus
dispatcher) and `crosstalk relay join` (the relay process) both do it: detached in its own session, stdin from
/dev/null, stdout and stderr appended to its log, and a bounded wait until the caller's `ready(pid)` holds (it holds
its lock and wrote its status). A process that exits first, or is not ready in time, is reported (`NotReady`), and one
still running at the deadline is killed with its whole process group, so no half-started process stays behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from crosstalk.fs.errors import CannotLaunch, NotReady

__all__ = ["CannotLaunch", "NotReady", "spawn_detached"]


def spawn_detached(
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str],
    cwd: str,
    ready: Callable[[int], bool],
    timeout: float,
    poll_s: float,
    kill_wait_s: float,
    log_nofollow: bool = False,
) -> int:
    """The pid of the started process once `ready(pid)` holds. CannotLaunch when it cannot be executed; NotReady
    when it exits first or is not ready within `timeout` s (then it is killed and reaped, at most `kill_wait_s` s).
    `log_nofollow`: refuse a log path that is a symlink (the open raises OSError, as any failure to open the log)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | (os.O_NOFOLLOW if log_nofollow else 0)
    fd = os.open(log, flags, 0o600)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise CannotLaunch(str(exc.strerror or exc)) from None
    finally:
        os.close(fd)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready(proc.pid):
            proc.returncode = 0  # detached on purpose: nobody waits for it, and Popen must not warn about that
            return proc.pid
        if proc.poll() is not None:
            break
        time.sleep(poll_s)
    exited = proc.poll()
    if exited is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group is it and whatever it started
        proc.wait(timeout=kill_wait_s)
    raise NotReady(exited, timeout)
