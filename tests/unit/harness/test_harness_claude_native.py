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
from crosstalk.harness.base import InjectResult
from crosstalk.harness.claude.native import NO_RECEIPTS, deliver, mode_class, peer_token, permission_mode


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
    """A listening socket that reads one connection to EOF and closes, as Claude does; with `receipt`, it first
    answers the frame's `from` as Claude 2.1.332 does for a message it holds or refuses (a new connection, one
    line), from this process."""

    def __init__(self, path: Path, receipt: dict | None = None) -> None:
        self.path = path
        self.receipt = receipt
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
        if self.receipt is not None:
            self.tell(self.receipt)
        conn.close()

    def tell(self, fields: dict) -> None:
        """A receipt on the message it read, to the frame's reply address."""
        frame = self.lines[-1]
        line = {"type": "control", "action": "peer_message_status", "orig_msg_id": frame["msg_id"], "msgV": 1,
                "msg_id": "r-1", "from": f"uds:{self.path}", **fields}  # fmt: skip
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(frame["from"].removeprefix("uds:"))
            s.sendall((json.dumps(line) + "\n").encode())

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
        assert out.evidence["claude"] == "eof_no_receipt"  # Claude sends no receipt for what it delivers at once
        auth, line = session.lines
        assert auth == {"type": "auth", "token": "peer-token"}
        assert (line["msgV"], line["type"], line["priority"]) == (1, "user", "next")
        # The reply address for Claude's receipts: a socket of this process beside the session's own.
        assert line["from"].startswith(f"uds:{tmp_path}/crosstalk-{os.getpid()}-") and line["from"].endswith(".sock")
        content = line["message"]["content"]
        assert content == (
            '<cross-session-message from-name="alice" from-mode="bypass">\nhi &lt;there&gt;\n</cross-session-message>'
        )
    finally:
        target.kill()
        target.wait(10)


HELD_RECEIPT = {"status": "held", "reason": "Your message is held for the recipient user's approval"}


def test_a_held_receipt_answers_held_and_the_users_decision_comes_later(tmp_path: Path):
    sock = tmp_path / "s.sock"
    session = Session(sock, receipt=HELD_RECEIPT)
    later: list[tuple[str, InjectResult]] = []
    done = threading.Event()

    def settled(mid: str, result: InjectResult) -> None:
        later.append((mid, result))
        if result.state is not State.HELD:
            done.set()

    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}
    out = deliver(env, os.getpid(), str(sock), "x", from_name="@ci:build", message_id="m-1", on_settled=settled)
    session.close()
    assert out.state is State.HELD and "held" in (out.reason or "") and out.evidence["receipt"] == "held"
    assert len(session.lines) == 1  # no key file: no auth line (peers are known by SO_PEERCRED anyway)
    session.tell({"status": "delivered"})
    assert done.wait(10)
    assert later[-1][0] == "m-1" and later[-1][1].state is State.ACCEPTED


@pytest.mark.parametrize(
    ("receipt", "state", "words"),
    [
        ({"status": "expired", "status_detail": "refused"}, State.REJECTED, "crossSessionInbound"),
        ({"status": "denied"}, State.REJECTED, "denied"),
        ({"status": "expired"}, State.UNREACHABLE, "expired"),
        ({"status": "dropped"}, State.UNREACHABLE, "dropped"),
    ],
)
def test_each_receipt_is_one_state(tmp_path: Path, receipt: dict, state: State, words: str):
    sock = tmp_path / "s.sock"
    session = Session(sock, receipt=receipt)
    out = deliver({"CLAUDE_CONFIG_DIR": str(tmp_path)}, os.getpid(), str(sock), "x", from_name="a")
    session.close()
    assert out.state is state and words in (out.reason or "")


def test_a_receipt_from_another_process_is_not_heard(tmp_path: Path):
    """Only the session the message was written into may say what became of it."""
    sock = tmp_path / "s.sock"
    other = sleeper()
    session = Session(sock, receipt=HELD_RECEIPT)
    try:
        out = deliver({"CLAUDE_CONFIG_DIR": str(tmp_path)}, other.pid, str(sock), "x", from_name="a")
        session.close()
        assert out.state is State.ACCEPTED  # the receipt came from this test process, not from `other`
    finally:
        other.kill()
        other.wait(10)


def test_where_no_receipt_can_be_had_the_answer_is_unknown(tmp_path: Path):
    odd = tmp_path / "a dir"  # a space: Claude sends no receipt to such an address
    odd.mkdir()
    sock = odd / "s.sock"
    session = Session(sock)
    out = deliver({"CLAUDE_CONFIG_DIR": str(tmp_path)}, os.getpid(), str(sock), "x", from_name="a")
    session.close()
    assert (out.state, out.reason) == (State.UNKNOWN, NO_RECEIPTS)


@pytest.mark.parametrize(
    ("flags", "cls"),
    [(("--dangerously-skip-permissions",), "bypass"), (("--permission-mode=plan",), "prompting"), ((), "prompting")],
)
def test_the_mode_class_is_what_sendmessage_asserts(flags: tuple[str, ...], cls: str):
    proc = sleeper(*flags)
    try:
        assert mode_class(proc.pid) == cls
    finally:
        proc.kill()
        proc.wait(10)
    assert mode_class(999_999_999) is None


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


def test_an_inbox_forgets_what_was_delivered_once_nothing_contradicted_it(tmp_path: Path, monkeypatch) -> None:
    """A message delivered at once is listened for a while (a contradicting receipt), then forgotten: an inbox that
    served many deliveries holds nothing for them."""
    from crosstalk.harness import receipt_inbox
    from crosstalk.harness.claude import receipts

    monkeypatch.setattr(receipts, "LATE_WINDOW_S", 0.0)
    monkeypatch.setattr(receipt_inbox, "TICK_S", 0.01)
    inbox = receipts.ReceiptInbox(str(tmp_path))
    try:
        for i in range(50):
            inbox.expect(f"m{i}", os.getpid())
            assert inbox.wait(f"m{i}", 0.0) is None
        deadline = time.monotonic() + 10
        while inbox._expected and time.monotonic() < deadline:
            with inbox._cond:
                inbox._cond.wait(0.05)
        assert inbox._expected == {}
    finally:
        inbox.close()
