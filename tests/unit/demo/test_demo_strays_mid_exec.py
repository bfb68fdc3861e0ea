"""`Procs.strays` finds a process whose environment is read in the middle of its exec: a parent's fork returns
(vfork resumes it at the exec) before the new program's environment is set up, and for that moment
/proc/PID/environ reads empty. Such a process is read again until its environment shows, or it turns out to be a
zombie, a kernel thread or gone; one whose environment stays empty is given up after EXEC_SETTLE_S. Here /proc is a
directory the test writes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from crosstalk.demo import procs as procs_mod
from crosstalk.demo.procs import Procs

MARKER = "CROSSTALK_HOME=/tmp/xt-demo-state"


def _proc(root: Path, pid: int, environ: bytes, state: str = "S", flags: int = 0) -> Path:
    entry = root / str(pid)
    entry.mkdir()
    (entry / "environ").write_bytes(environ)
    (entry / "stat").write_text(f"{pid} (python3) {state} 1 {pid} {pid} 0 -1 {flags} 0 0 0 0\n")
    return entry


@pytest.fixture
def proc_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(procs_mod, "PROC", tmp_path)
    return tmp_path


def test_a_process_read_mid_exec_is_found_once_its_environment_shows(proc_root: Path) -> None:
    _proc(proc_root, 101, f"A=1\0{MARKER}\0".encode())
    late = _proc(proc_root, 102, b"")  # mid-exec when first read
    _proc(proc_root, 103, b"B=2\0")
    fill = threading.Timer(0.1, lambda: (late / "environ").write_bytes(f"{MARKER}\0PATH=/bin\0".encode()))
    fill.start()
    try:
        assert sorted(Procs(MARKER).strays()) == [101, 102]
    finally:
        fill.cancel()


def test_zombies_and_kernel_threads_are_not_waited_for(proc_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs_mod, "EXEC_SETTLE_S", 30.0)  # waiting for either would fail the test's timeout
    _proc(proc_root, 201, b"", state="Z")
    _proc(proc_root, 202, b"", flags=procs_mod.PF_KTHREAD)
    _proc(proc_root, 203, MARKER.encode() + b"\0")
    assert list(Procs(MARKER).strays()) == [203]


def test_an_environment_that_stays_empty_is_given_up(proc_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs_mod, "EXEC_SETTLE_S", 0.2)
    _proc(proc_root, 301, b"")  # started with an empty environment: never the demo's
    assert list(Procs(MARKER).strays()) == []
