"""Writing into a Claude session that runs without crosstalk, as Claude's own SendMessage writes it: against a unix
socket standing in for the session (the real one is driven in tests/e2e/test_claude_live.py)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crosstalk.core.states import State
from crosstalk.harness.claude.native import HELD, deliver, peer_token, permission_mode

pytestmark = pytest.mark.unit


def sleeper(*flags: str) -> subprocess.Popen[bytes]:
    """A process whose command line carries `flags`, as a Claude process's would (once it has exec'd)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", *flags])
    deadline = time.monotonic() + 10
    while b"time.sleep" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the process did not start"
        time.sleep(0.005)
    return proc


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        (("--dangerously-skip-permissions",), "bypass"),
        (("--permission-mode", "bypassPermissions"), "bypass"),
        (("--permission-mode=plan",), "plan"),
        (("--permission-mode", "acceptEdits"), "acceptEdits"),
        ((), None),
    ],
)
def test_the_permission_mode_is_read_from_the_command_line(flags: tuple[str, ...], mode: str | None):
    proc = sleeper(*flags)
    try:
        assert permission_mode(proc.pid) == mode
    finally:
        proc.kill()
        proc.wait(10)
    assert permission_mode(999_999_999) is None


class Session:
    """A listening socket that reads one connection to EOF and closes, as Claude does."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(str(path))
        self.srv.listen(1)
        self.lines: list[dict] = []
        self.thread = threading.Thread(target=self._one, daemon=True)
        self.thread.start()

    def _one(self) -> None:
        conn, _ = self.srv.accept()
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        self.lines = [json.loads(x) for x in data.decode().splitlines()]
        conn.close()

    def close(self) -> None:
        self.thread.join(5)
        self.srv.close()


def key(tmp_path: Path, pid: int, sock: Path, mode: int = 0o600) -> dict[str, str]:
    sessions = tmp_path / "sessions"
    sessions.mkdir(exist_ok=True)
    path = sessions / f"{pid}.{hashlib.sha256(str(sock).encode()).hexdigest()}.key"
    path.write_text(json.dumps({"peerToken": "peer-token", "procStart": "1", "pidDomain": "x"}))
    os.chmod(path, mode)
    return {"CLAUDE_CONFIG_DIR": str(tmp_path)}


def test_one_line_as_sendmessage_writes_it_with_the_peer_token_and_the_real_mode(tmp_path: Path):
    sock = tmp_path / "s.sock"
    target = sleeper()  # the receiving session: no bypass
    session = Session(sock)
    try:
        env = key(tmp_path, target.pid, sock)
        out = deliver(env, target.pid, str(sock), "hi <there>", from_name="alice", from_mode="bypass")
        session.close()
        assert out.state is State.ACCEPTED and out.evidence["native"] is True
        auth, line = session.lines
        assert auth == {"type": "auth", "token": "peer-token"}
        assert (line["msgV"], line["type"], line["priority"]) == (1, "user", "next") and "from" not in line
        content = line["message"]["content"]
        assert content == (
            '<cross-session-message from-name="alice" from-mode="bypass">\nhi &lt;there&gt;\n</cross-session-message>'
        )
    finally:
        target.kill()
        target.wait(10)


def test_a_bypass_receiver_holds_what_asserts_no_bypass_and_the_sender_is_told(tmp_path: Path):
    sock = tmp_path / "s.sock"
    target = sleeper("--dangerously-skip-permissions")
    session = Session(sock)
    try:
        out = deliver({"CLAUDE_CONFIG_DIR": str(tmp_path)}, target.pid, str(sock), "x", from_name="@ci:build")
        session.close()
        assert (out.state, out.reason) == (State.UNKNOWN, HELD)
        assert len(session.lines) == 1  # no key file: no auth line (peers are known by SO_PEERCRED anyway)
    finally:
        target.kill()
        target.wait(10)


def test_no_socket_or_a_file_in_its_place_is_unreachable_and_a_shared_key_is_ignored(tmp_path: Path):
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}
    assert deliver(env, os.getpid(), str(tmp_path / "gone.sock"), "x", from_name="a").state is State.UNREACHABLE
    (tmp_path / "file.sock").write_text("")
    out = deliver(env, os.getpid(), str(tmp_path / "file.sock"), "x", from_name="a")
    assert out.state is State.UNREACHABLE and "not a socket" in (out.reason or "")
    sock = tmp_path / "s.sock"
    key(tmp_path, 42, sock, mode=0o644)
    assert peer_token(env, 42, str(sock)) is None
    key(tmp_path, 42, sock)
    assert peer_token(env, 42, str(sock)) == "peer-token"
