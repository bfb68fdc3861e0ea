"""Claude's native messaging and Codex's state root, on real files, sockets and processes (the real harnesses are
in tests/e2e/doctor)."""

from __future__ import annotations

import contextlib
import json
import socket

from crosstalk.fs.procinfo import proc_start_time
from tests.support.doctor_machine import Machine, findings, problems


def _record(machine: Machine, pid: int, sock_path: str, name: str = "work") -> None:
    sessions = machine.home / ".claude" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    record = {"pid": pid, "sessionId": "0b0c", "procStart": proc_start_time(pid), "name": name,
              "messagingSocketPath": sock_path, "peerProtocol": 1}  # fmt: skip
    (sessions / f"{pid}.json").write_text(json.dumps(record))


def test_a_live_session_with_its_socket_is_ok_and_without_it_a_problem(machine: Machine) -> None:
    session = machine.sleeper()
    socks = machine.dir / "run" / "cc-socks"
    socks.mkdir(mode=0o700)
    path = socks / f"{session.pid}.sock"
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as listener:
        listener.bind(str(path))
        listener.listen(1)
        _record(machine, session.pid, str(path))
        code, report = machine.doctor()
        [row] = findings(report, "claude-messaging")
        assert code == 0 and row == {
            "check": "claude-messaging", "status": "ok",
            "text": f"native messaging available (1 live session with sockets; sockets in {socks})",
        }  # fmt: skip
    path.unlink()
    code, report = machine.doctor()
    [p] = problems(report, "claude-messaging")
    assert code == 1
    assert (
        p["text"]
        == f"Claude session work (pid {session.pid}) has no messaging socket ({path}): messages cannot reach it"
    )
    assert str(session.pid) in p["fix"]


def test_a_dead_sessions_record_is_not_a_live_session(machine: Machine) -> None:
    pid, _ = machine.dead_process()
    sessions = machine.home / ".claude" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / f"{pid}.json").write_text(json.dumps({"pid": pid, "sessionId": "x", "procStart": "1"}))
    code, report = machine.doctor()
    assert code == 0
    assert findings(report, "claude-messaging")[0]["text"] == "claude not on PATH: nothing to check"


def test_bare_mode_and_a_shared_socket_dir_are_problems(machine: Machine) -> None:
    machine.sleeper()
    (machine.dir / "run" / "cc-socks").mkdir(mode=0o755)
    session = machine.sleeper()
    _record(machine, session.pid, str(machine.dir / "run" / "cc-socks" / "none.sock"))
    code, report = machine.doctor(env={"CLAUDE_CODE_SIMPLE": "1"})
    fixes = [p["fix"] for p in problems(report, "claude-messaging")]
    assert code == 1
    assert fixes[:2] == [
        "unset CLAUDE_CODE_SIMPLE, then restart the Claude sessions",
        f"chmod 700 {machine.dir / 'run' / 'cc-socks'}",
    ]


def test_a_shell_with_another_state_root_than_codexs_entry_is_a_problem(machine: Machine) -> None:
    assert machine.crosstalk("install", "codex").returncode == 0  # from this shell: the entry carries its root
    code, report = machine.doctor()
    [row] = findings(report, "codex-env")
    assert code == 0 and row["status"] == "ok"
    other = machine.dir / "other"
    code, report = machine.doctor(env={"CROSSTALK_HOME": str(other)})
    [p] = problems(report, "codex-env")
    assert code == 1
    assert p["text"] == (
        f"Codex sessions' crosstalk uses {machine.paths.root} ({machine.home / '.codex' / 'config.toml'}), but this "
        f"shell uses {other}"
    )
    assert p["fix"] == "crosstalk install codex (from the shell you start codex in), then restart codex"
