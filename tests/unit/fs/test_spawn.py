"""fs/spawn.py's `spawn_detached`: the one way the dispatcher and the relay process are started in the background.
Real child processes (a few lines of Python), each bounded by a timeout; none is left running."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from crosstalk.fs.procinfo import pid_alive
from crosstalk.fs.spawn import CannotLaunch, NotReady, spawn_detached

# Writes a line to its log (stdout), then the file that says it is ready, then waits to be killed.
READY_CHILD = "import sys, time; print('up', flush=True); open(sys.argv[1], 'w').close(); time.sleep(60)"


def _spawn(tmp_path: Path, code: str, *args: str, ready=None, timeout: float = 10.0, **kw) -> int:
    return spawn_detached(
        kw.pop("argv", None) or [sys.executable, "-c", code, *args],
        log=tmp_path / "child.log",
        env=dict(os.environ),
        cwd=str(tmp_path),
        ready=ready or (lambda pid: (tmp_path / "ready").exists()),
        timeout=timeout,
        poll_s=0.01,
        kill_wait_s=5.0,
        **kw,
    )


def test_a_ready_process_runs_detached_in_its_own_session_with_its_output_in_the_log(tmp_path: Path) -> None:
    pid = _spawn(tmp_path, READY_CHILD, str(tmp_path / "ready"))
    try:
        assert os.getsid(pid) == pid  # its own session: a closed terminal does not take it down
        assert (tmp_path / "child.log").read_text() == "up\n"
        assert (tmp_path / "child.log").stat().st_mode & 0o777 == 0o600
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def test_a_process_that_exits_before_it_is_ready_is_reported_with_its_status(tmp_path: Path) -> None:
    (tmp_path / "child.log").write_text("an earlier run\n")
    with pytest.raises(NotReady) as info:
        _spawn(tmp_path, "import sys; print('bad config', flush=True); sys.exit(3)")
    assert info.value.exited == 3 and info.value.message == "exited with 3"
    assert (tmp_path / "child.log").read_text() == "an earlier run\nbad config\n"  # appended, never truncated


def test_a_process_not_ready_in_time_is_killed_with_its_group(tmp_path: Path) -> None:
    seen: list[int] = []

    def never(pid: int) -> bool:
        seen.append(pid)
        return False

    with pytest.raises(NotReady) as info:
        _spawn(tmp_path, "import time; time.sleep(60)", ready=never, timeout=0.3)
    assert info.value.exited is None and info.value.message == "did not come up within 0.3 s"
    assert seen and not pid_alive(seen[0])


def test_a_program_that_cannot_be_executed_is_cannot_launch(tmp_path: Path) -> None:
    with pytest.raises(CannotLaunch) as info:
        _spawn(tmp_path, "", argv=[str(tmp_path / "absent")])
    assert info.value.message == "No such file or directory"


def test_a_log_behind_a_symlink_is_refused_when_asked(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / "child.log").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        _spawn(tmp_path, "pass", log_nofollow=True)
    assert not (tmp_path / "elsewhere").read_text()  # nothing was started to write to it
