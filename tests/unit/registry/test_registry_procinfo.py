from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.fs import procinfo
from crosstalk.fs.procinfo import is_same_process, pid_alive, proc_start_time


def _unused_pid() -> int:
    # Above pid_max no process can exist.
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@pytest.fixture(autouse=True)
def own_kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test its own kept pidfds: earlier tests in this process may have kept some (the shims they ran in it)."""
    monkeypatch.setattr(procinfo, "_kept", {})
    yield
    for key in list(procinfo._kept):
        procinfo._forget(key)


def test_own_process() -> None:
    started = proc_start_time(os.getpid())
    assert started is not None and started.isdigit()
    assert pid_alive(os.getpid())
    assert is_same_process(os.getpid(), started)


def test_pid_reuse_and_dead_pids() -> None:
    started = proc_start_time(os.getpid())
    assert started is not None
    assert not is_same_process(os.getpid(), str(int(started) + 1))
    assert not is_same_process(os.getpid(), None)
    assert proc_start_time(_unused_pid()) is None
    assert not pid_alive(_unused_pid())
    assert not is_same_process(_unused_pid(), started)
    assert not pid_alive(0) and not pid_alive(-1)


def test_comm_with_spaces_and_parens(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # comm "(a) b) (c" must not shift the fields: parse after the LAST ')'.
    rest = " ".join(["S", *[str(n) for n in range(4, 22)], "987654", "23", "24"])
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_bytes(f"4242 ((a) b) (c) {rest}\n".encode())
    monkeypatch.setattr(procinfo, "_STAT_PATH", f"{tmp_path}/{{}}/stat")
    assert proc_start_time(4242) == "987654"
    assert is_same_process(4242, "987654")


def test_zombie_is_not_the_same_process(monkeypatch: pytest.MonkeyPatch) -> None:
    fields = [b"Z", *[b"0"] * 18, b"555"]
    monkeypatch.setattr(procinfo, "_stat_fields", lambda pid: fields)
    assert not is_same_process(4242, "555")


def _child() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdin=subprocess.DEVNULL)  # killed


def test_kept_proof_sees_the_exit_at_once_a_zombie_included() -> None:
    # A sending shim proves its target per message with the kept pidfd: the message after the target exits (not
    # yet reaped: a zombie, as a crashed agent's parent may leave it) must find it gone, and the pid's entry is let go.
    child = _child()
    try:
        started = proc_start_time(child.pid)
        assert started is not None
        assert procinfo.is_same_process_kept(child.pid, started)
        assert (child.pid, started) in procinfo._kept
        assert procinfo.is_same_process_kept(child.pid, started)  # the kept pidfd answers
        assert not procinfo.is_same_process_kept(child.pid, str(int(started) + 1))  # another start: not it
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left a zombie (not reaped)
        assert not procinfo.is_same_process_kept(child.pid, started)
        assert (child.pid, started) not in procinfo._kept
    finally:
        child.kill()
        child.wait(timeout=10)
    assert not procinfo.is_same_process_kept(_unused_pid(), "1")
    assert not procinfo.is_same_process_kept(os.getpid(), None)


def test_kept_proof_without_pidfds_reads_proc_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, "pidfd_open")

    monkeypatch.setattr(procinfo.os, "pidfd_open", no_pidfd)
    started = proc_start_time(os.getpid())
    assert procinfo.is_same_process_kept(os.getpid(), started)
    assert (os.getpid(), started) not in procinfo._kept
    assert not procinfo.is_same_process_kept(os.getpid(), str(int(started or 0) + 1))


def test_kept_pidfds_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procinfo, "KEPT_MAX", 2)
    children = [_child() for _ in range(3)]
    try:
        for child in children:
            assert procinfo.is_same_process_kept(child.pid, proc_start_time(child.pid))
            assert len(procinfo._kept) <= 2
    finally:
        for child in children:
            child.kill()
            child.wait(timeout=10)
