"""Each bus transport, on a real transport with a real bare git remote: remote, protocol version, commits not
pushed, the last successful push, and this machine's dispatcher (and what a killed one leaves)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from crosstalk.bus.protocol.layout import PROTOCOL_VERSION
from crosstalk.fs.procinfo import pid_alive
from tests.support.doctor_machine import Machine, findings, problems


def _git(*args: str, cwd: object) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=60).stdout


def _transport(machine: Machine, remote: bool = True) -> tuple[str, object]:
    root = machine.dir / "t1"
    args = ["transport", "init", "t1", "--dir", str(root)]
    if remote:
        bare = machine.dir / "remote.git"
        _git("init", "-q", "--bare", "--initial-branch=main", str(bare), cwd=machine.dir)
        args += ["--remote", str(bare)]
    proc = machine.crosstalk(*args)
    assert proc.returncode == 0, proc.stderr
    return str(root), root


def test_a_pushed_transport_shows_its_remote_version_and_last_push(machine: Machine) -> None:
    root, _ = _transport(machine)
    code, report = machine.doctor()
    rows = findings(report, "transport")
    assert code == 0, problems(report)
    summary = rows[0]["text"]
    assert summary.startswith(f"t1 (v{PROTOCOL_VERSION}) {machine.dir / 'remote.git'}, last push 20")
    assert rows[1] == {
        "check": "transport", "status": "note", "text": "t1: no dispatcher running on this machine",
        "fix": "crosstalk server start --transport t1",
    }  # fmt: skip

    # A commit made here and not pushed is a problem that says how to push it.
    (machine.dir / "t1" / "notes.txt").write_text("x\n")
    _git("add", "notes.txt", cwd=root)
    _git("-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "local", cwd=root)
    code, report = machine.doctor()
    [p] = problems(report, "transport")
    assert code == 1 and p["text"].endswith(": 1 commit not pushed")
    assert p["fix"] == f"git -C {root} push origin HEAD (or crosstalk server start --transport t1)"
    _git("push", "-q", "origin", "HEAD", cwd=root)
    assert machine.doctor()[0] == 0


def test_a_transport_without_a_remote_is_a_note(machine: Machine) -> None:
    root, _ = _transport(machine, remote=False)
    code, report = machine.doctor()
    [row, _dispatcher] = findings(report, "transport")
    assert code == 0
    assert row["status"] == "note" and "no remote, no push recorded here: other machines cannot reach it" in row["text"]
    assert row["fix"] == f"git -C {root} remote add origin URL"


def test_a_wrong_version_and_a_missing_work_tree_are_problems(machine: Machine) -> None:
    _, root = _transport(machine)
    (root / "CROSSTALK-VERSION").write_text(f"{PROTOCOL_VERSION - 1}\n")  # type: ignore[operator]
    code, report = machine.doctor()
    [p] = problems(report, "transport")
    assert code == 1 and f"v{PROTOCOL_VERSION - 1}" in p["text"] and p["fix"].startswith("crosstalk transport rm t1")
    os.rename(root, machine.dir / "moved")  # type: ignore[arg-type]
    code, report = machine.doctor()
    [p] = problems(report, "transport")
    assert p == {
        "check": "transport", "status": "problem", "text": f"t1: {root} does not exist",
        "fix": "crosstalk transport rm t1",
    }  # fmt: skip


def test_a_killed_dispatchers_pid_file_and_socket_are_pruned_and_a_running_ones_kept(machine: Machine) -> None:
    _transport(machine)
    started = machine.crosstalk("server", "start", "--transport", "t1", "--json")
    assert started.returncode == 0, started.stderr
    pid = json.loads(started.stdout)["pid"]
    try:
        state = machine.paths.root / "bus" / "state" / "t1"
        code, report = machine.doctor("--fix")
        assert code == 0, problems(report)
        assert (state / "wake.sock").exists() and (state / "dispatcher.pid").exists()  # alive: kept
        assert any(f["status"] == "ok" and f"dispatcher pid {pid}" in f["text"] for f in findings(report, "transport"))
    finally:
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert not pid_alive(pid)
    code, report = machine.doctor()
    [p] = problems(report, "stale")
    assert code == 1 and p["text"] == "dispatcher for t1 is not running but left pid file, socket"
    code, report = machine.doctor("--fix")
    assert code == 0
    assert not (state / "wake.sock").exists() and not (state / "dispatcher.pid").exists()
