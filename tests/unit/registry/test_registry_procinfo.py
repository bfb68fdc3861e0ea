from __future__ import annotations

import os
from pathlib import Path

import pytest

from crosstalk.fs import procinfo
from crosstalk.fs.procinfo import is_same_process, pid_alive, proc_start_time


def _unused_pid() -> int:
    # Above pid_max no process can exist.
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


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
