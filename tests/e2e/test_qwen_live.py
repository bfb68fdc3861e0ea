"""Qwen Code for real: the pinned 0.24.4 TUI in tmux with crosstalk installed the README's way (`crosstalk install
qwen`), against a mock chat-completions server that logs every request; the tests assert what each model saw and
the one state each send answered. One module's sessions are shared by its tests (each test uses its own tokens):
a Qwen session with crosstalk, a headless Claude Code session with crosstalk, and Qwen sessions without crosstalk
(one that reviews peers, one whose workspace refuses them)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live_claude import CROSSTALK, LiveClaude
from tests.support.live_qwen import LiveQwen

pytestmark = pytest.mark.timeout(300)


class Live:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.closers: list[Any] = []

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.root), "CROSSTALK_HOME": str(self.root / "xt"),
               "QWEN_HOME": str(self.root / "qwen"), "USER": "tester",
               "XDG_RUNTIME_DIR": str(self.root / "clirun")}  # fmt: skip
        (self.root / "clirun").mkdir(mode=0o700, exist_ok=True)
        return subprocess.run([str(CROSSTALK), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(autouse=True)
def _clis(require: Callable[[str], Path]) -> None:
    require("qwen")
    require("claude")


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    """The module's sessions, started by the first test that needs each, closed after the last test."""
    root = Path(tempfile.mkdtemp(prefix="xq", dir="/tmp"))  # short: unix socket paths stay under 108 bytes
    world = Live(root)
    try:
        yield world
    finally:
        for close in reversed(world.closers):
            close()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def _lazy(live: Live, key: str, start: Callable[[], Any]) -> Any:
    if not hasattr(live, key):
        session = start()
        live.closers.append(session.close)
        setattr(live, key, session)
    return getattr(live, key)


def qwen(live: Live) -> LiveQwen:
    """The Qwen session with crosstalk, registered (its first tool call)."""
    q = _lazy(live, "q", lambda: LiveQwen.start(live.root / "q", crosstalk_home=live.root / "xt",
                                                qwen_home=live.root / "qwen"))  # fmt: skip
    if not hasattr(live, "q_name"):
        q.say("CALL mcp__crosstalk__list_agents {}")
        live.q_name = next(r for r in q.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]  # type: ignore[attr-defined]
    return q


def claude(live: Live) -> LiveClaude:
    c = _lazy(live, "c", lambda: LiveClaude.start(live.root / "c", crosstalk_home=live.root / "xt",
                                                  config_dir=live.root / "claude",
                                                  extra_env={"QWEN_HOME": str(live.root / "qwen")}))  # fmt: skip
    if not hasattr(live, "c_name"):
        c.say("CALL mcp__crosstalk__list_agents {}")
        live.c_name = next(r for r in c.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]  # type: ignore[attr-defined]
    return c


def bare(live: Live, key: str, settings: dict[str, Any] | None = None) -> LiveQwen:
    """A Qwen session without crosstalk (same QWEN_HOME: the others discover it)."""
    return _lazy(live, key, lambda: LiveQwen.start(live.root / key, crosstalk_home=live.root / "xt",
                                                   qwen_home=live.root / "qwen", install=False,
                                                   settings=settings))  # fmt: skip


# The session without crosstalk that reviews peers (default approval mode: Claude's bypass and the CLI's silence do
# not match it), and lets a held message wait one minute (the shortest Qwen allows) before it expires.
REVIEWS = {"tools": {"approvalMode": "default"}, "agents": {"crossSessionHeldExpiry": "1m"}}


def envelope_of(raw: str, token: str) -> str:
    return raw[max(0, raw.find(token) - 600) : raw.find(token) + 60]


def review(b: LiveQwen, verdict: str) -> None:
    """The user of `b` lists what waits (`/peers`), then accepts or denies all of it (Qwen asks for a fresh list)."""
    b.say("/peers")
    deadline = time.monotonic() + 30
    while "waiting for your review" not in b.screen():
        assert time.monotonic() < deadline, b.tail()
        time.sleep(0.1)
    b.say(f"/peers {verdict} all")


# ---------------------------------------------------------------------------------------------------------------------
def test_a_shell_send_reaches_the_qwen_model_and_the_tui_shows_it(live: Live):
    q = qwen(live)
    token = secrets.token_hex(4)
    out = live.cli("send", live.q_name, f"build 481 failed {token}", "--json")  # type: ignore[attr-defined]
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["state"] == "queued", answer
    seen = q.wait_seen(f"build 481 failed {token}").raw
    assert f"[crosstalk inform · from @cli:tester (external) · message-id {answer['message_id']}]\\nbuild 481" in seen
    assert 'origin=\\"own-process\\"' in seen  # the shim's child token: a process the session started
    deadline = time.monotonic() + 30
    while answer["message_id"] not in "".join(q.screen().split()):  # "Message from a process this session started"
        assert time.monotonic() < deadline, q.tail()
        time.sleep(0.1)
    # `watch` shows the agent and the message
    snap = json.loads(live.cli("watch", "--once", "--json").stdout)
    assert any(a["name"] == live.q_name and a["harness"] == "qwen" for a in snap["agents"]), snap["agents"]  # type: ignore[attr-defined]


def test_claude_to_qwen_idle_then_busy_says_when_the_model_sees_it(live: Live):
    q, c = qwen(live), claude(live)
    token = secrets.token_hex(4)
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': live.q_name, 'text': f'idle hello {token}'})}")  # type: ignore[attr-defined]
    answer = c.wait_tool_result("send_message", after=n)
    assert answer["state"] == "queued" and "idle session starts a turn with it at once" in answer["reason"], answer
    seen = q.wait_seen(f"idle hello {token}").raw
    assert f"[crosstalk inform · from agents:{live.c_name} · message-id {answer['message_id']}]" in seen  # type: ignore[attr-defined]
    # busy: a slow turn runs when the message comes; it is queued at once and starts a turn after that one ends
    q.mock.scripts_by[f"slow turn {token}"] = "SLEEP 8"
    q.say(f"slow turn {token}")
    busy = q.wait_seen(f"slow turn {token}")
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': live.q_name, 'text': f'busy hello {token}'})}")  # type: ignore[attr-defined]
    answer = c.wait_tool_result("send_message", after=n)
    assert answer["state"] == "queued" and "a busy one after its running turn ends" in answer["reason"], answer
    answered_at = time.time()
    seen_busy = q.wait_seen(f"busy hello {token}", timeout=60)
    assert seen_busy.at - busy.at >= 7.5, "the message joined the running turn"
    assert answered_at < busy.at + 8, "the send's answer waited for the busy turn"


def test_qwen_to_claude_by_name_and_an_ask_from_qwen_answered_with_reply(live: Live):
    q, c = qwen(live), claude(live)
    token = secrets.token_hex(4)
    n = len(q.requests())
    q.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': live.c_name, 'text': f'hello claude {token}'})}")  # type: ignore[attr-defined]
    assert q.wait_tool_result("send_message", after=n)["state"] == "accepted"
    c.wait_seen(f"hello claude {token}")
    answer = json.dumps({"message_id": "$MESSAGE_ID", "text": f"use main {token}"})
    ask = json.dumps({"to": live.c_name, "text": f"which branch {token}?\nCALL mcp__crosstalk__reply {answer}",  # type: ignore[attr-defined]
                      "deadline_seconds": 120})  # fmt: skip
    n = len(q.requests())
    q.say(f"CALL mcp__crosstalk__ask {ask}")
    ask_id = q.wait_tool_result("ask", after=n)["message_id"]
    seen = q.wait_seen(f"in-reply-to {ask_id}]", after=n).raw
    assert f"from agents:{live.c_name}" in seen and f"use main {token}" in seen  # type: ignore[attr-defined]


def test_a_held_message_is_reported_held_then_delivered_when_its_user_releases_it(live: Live):
    """fromMode mismatch: Claude runs with bypass permissions, the session without crosstalk reviews each action."""
    c, b = claude(live), bare(live, "b1", REVIEWS)
    name = str(b.record()["name"])  # type: ignore[index]
    token = secrets.token_hex(4)
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': name, 'text': f'held hello {token}'})}")
    answer = c.wait_tool_result("send_message", after=n)
    assert answer["state"] == "held", answer
    assert not any(f"held hello {token}" in r.raw for r in b.requests())
    review(b, "accept")
    b.wait_seen(f"held hello {token}")
    # `delivered` after `held` is `queued`, as a first `delivered` is: the notice carries that state's reason
    c.wait_seen(f"your message {answer['message_id']} to {name}, held for its user, was delivered: released by its "
                "user; delivered: Qwen Code queued it for its model")  # fmt: skip


def test_a_held_message_expires_unread_and_the_sender_is_told_unreachable(live: Live):
    """Nobody reviews it: after `agents.crossSessionHeldExpiry` Qwen answers `expired`, one state: unreachable."""
    c, b = claude(live), bare(live, "b1", REVIEWS)
    name = str(b.record()["name"])  # type: ignore[index]
    token = secrets.token_hex(4)
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': name, 'text': f'never reviewed {token}'})}")
    answer = c.wait_tool_result("send_message", after=n)
    assert answer["state"] == "held", answer
    told = c.wait_seen(f"your message {answer['message_id']} to {name}, held for its user, was not delivered",
                       timeout=150).raw  # fmt: skip
    assert "(unreachable): expired" in told, told[-600:]
    assert not any(f"never reviewed {token}" in r.raw for r in b.requests())


def test_a_queued_message_lost_when_the_session_exits_unread_is_told_unreachable(live: Live):
    """Claude (bypass) to a yolo session without crosstalk (bypass too): delivered → queued behind a busy turn; the
    session exits before that turn ends; Qwen answers `expired` and Claude's session is told."""
    c = claude(live)
    b = LiveQwen.start(live.root / "b3", crosstalk_home=live.root / "xt", qwen_home=live.root / "qwen", install=False)
    try:
        name = str(b.record()["name"])  # type: ignore[index]
        token = secrets.token_hex(4)
        b.mock.scripts_by[f"slow turn {token}"] = "SLEEP 30"
        b.say(f"slow turn {token}")
        b.wait_seen(f"slow turn {token}")
        n = len(c.requests())
        c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': name, 'text': f'queued then lost {token}'})}")
        answer = c.wait_tool_result("send_message", after=n)
        assert answer["state"] == "queued", answer
        b.pane.close()  # the terminal closes (SIGHUP) while the slow turn runs
    finally:
        b.close()
    told = c.wait_seen(f"your message {answer['message_id']} to {name}, queued for its model, was not delivered",
                       timeout=60).raw  # fmt: skip
    assert "(unreachable): expired" in told, told[-600:]
    assert not any(f"queued then lost {token}" in r.raw for r in b.requests())


def test_a_shell_send_to_a_session_without_crosstalk_is_held_and_a_refusing_one_rejects(live: Live):
    b = bare(live, "b1", REVIEWS)
    r = bare(live, "b2", {"agents": {"crossSessionInbound": "refuse"}})
    rows = {row["name"]: row for row in json.loads(live.cli("list", "--json").stdout)}
    for session in (b, r):
        row = rows[str(session.record()["name"])]  # type: ignore[index]
        assert row["harness"] == "qwen" and row["crosstalk"] is False and row["reachable"] is True, row
    token = secrets.token_hex(4)
    out = live.cli("send", str(r.record()["name"]), f"refused hello {token}")  # type: ignore[index]
    assert out.returncode == 3 and "refused" in out.stderr, (out.stdout, out.stderr)
    out = live.cli("send", str(b.record()["name"]), f"shell held {token}", "--json")  # type: ignore[index]
    assert out.returncode == 5 and json.loads(out.stdout)["state"] == "held", (out.stdout, out.stderr)
    assert not any(token in x.raw for x in r.requests() + b.requests())
    review(b, "deny")


def test_clear_keeps_the_name_and_messages_reach_the_new_session(live: Live):
    q = qwen(live)
    before = q.session_id()
    q.say("/clear")
    deadline = time.monotonic() + 30
    while q.session_id() in ("", before):
        assert time.monotonic() < deadline, q.tail()
        time.sleep(0.1)
    token = secrets.token_hex(4)
    n = len(q.requests())
    q.say("CALL mcp__crosstalk__list_agents {}")
    rows = q.wait_tool_result("list_agents", after=n)["agents"]
    assert next(r for r in rows if r.get("self"))["name"] == live.q_name  # type: ignore[attr-defined]
    out = live.cli("send", live.q_name, f"after clear {token}", "--json")  # type: ignore[attr-defined]
    assert json.loads(out.stdout)["state"] == "queued", (out.stdout, out.stderr)
    q.wait_seen(f"after clear {token}")


def test_qwen_to_codex_and_pi_by_name(live: Live, require: Callable[[str], Path]):
    from tests.support.live_codex import LiveCodex
    from tests.support.live_pi import LivePi

    require("codex")
    require("pi")
    q = qwen(live)
    cx = _lazy(live, "cx", lambda: LiveCodex.start(live.root / "cx", crosstalk_home=live.root / "xt"))
    pi = _lazy(live, "pi", lambda: LivePi.start(live.root / "p", crosstalk_home=live.root / "xt",
                                                PI_CROSSTALK_HANDLE="pi-q"))  # fmt: skip
    thread = cx.start_thread()
    cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
    codex_name = next(r for r in cx.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
    token = secrets.token_hex(4)
    for to, text in ((codex_name, f"to codex {token}"), ("pi-q", f"to pi {token}")):
        n = len(q.requests())
        q.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': to, 'text': text})}")
        assert q.wait_tool_result("send_message", after=n)["state"] in ("accepted", "queued")
    cx.wait_seen(f"to codex {token}")
    assert f"[from agents:{live.q_name}] to pi {token}" in pi.wait_seen(f"to pi {token}").raw  # type: ignore[attr-defined]


def test_a_restarted_shim_resumes_its_journal_and_a_reply_to_a_pre_restart_ask_routes(live: Live):
    """Q's shim is killed (-9) while Q owes Claude an answer; the next crosstalk call finds the same agent (same
    agent_id, the journal replayed), and Q's reply to the pre-restart ask reaches Claude."""
    import signal

    from crosstalk.fs.procinfo import pid_alive

    q, c = qwen(live), claude(live)
    token = secrets.token_hex(4)
    n = len(c.requests())
    ask = {"to": live.q_name, "text": f"before the restart {token}", "deadline_seconds": 300}  # type: ignore[attr-defined]
    c.say(f"CALL mcp__crosstalk__ask {json.dumps(ask)}")
    ask_id = c.wait_tool_result("ask", after=n)["message_id"]
    q.wait_seen(f"before the restart {token}")
    old = q.agent()
    os.kill(old.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while pid_alive(old.pid):
        assert time.monotonic() < deadline, f"shim {old.pid} still running 30 s after SIGKILL"
        time.sleep(0.01)
    reply = {"message_id": ask_id, "text": f"after the restart {token}"}
    n = len(q.requests())
    q.say(f"CALL mcp__crosstalk__reply {json.dumps(reply)}")
    # Qwen finds its MCP child gone on this call, reconnects, and does not replay it ("MCP tool execution may have
    # completed before the connection failed"): a model calls again; so does this test, once.
    deadline = time.monotonic() + 60
    while not (texts := q.tool_results("mcp__crosstalk__reply", after=n)):
        assert time.monotonic() < deadline, q.tail()
        time.sleep(0.05)
    if not texts[-1].lstrip().startswith("{"):
        n = len(q.requests())
        q.say(f"CALL mcp__crosstalk__reply {json.dumps(reply)}")
    replied = q.wait_tool_result("reply", after=n)
    new = q.agent()
    assert new.agent_id == old.agent_id and new.pid != old.pid and new.name == old.name
    assert replied["state"] == "replied", replied
    c.wait_seen(f"after the restart {token}")


def test_a_controller_token_the_user_minted_for_crosstalk_is_delivered_without_review(live: Live):
    """docs/qwen.md's set-up: `qwen sessions controllers add --label crosstalk`, its token saved 0600 for crosstalk.
    The shell's message to a session that reviews peers is then delivered, shown as from that controller."""
    import re

    b = bare(live, "b1", REVIEWS)
    qwen_bin = str(Path(b.env["PATH"].split(os.pathsep)[0]) / "qwen")
    minted = subprocess.run([qwen_bin, "sessions", "controllers", "add", "--label", "crosstalk"], env=b.env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    token = re.search(r"qpc_[0-9a-f]{64}", minted.stdout + minted.stderr)
    assert token is not None, (minted.stdout, minted.stderr)
    path = live.root / "xt" / "qwen-controller.token"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_text(token.group(0) + "\n")
    try:
        path.chmod(0o644)  # readable by others: not used
        word = secrets.token_hex(4)
        out = live.cli("send", str(b.record()["name"]), f"ignored controller {word}", "--json")  # type: ignore[index]
        assert json.loads(out.stdout)["state"] == "held", out.stdout
        review(b, "deny")
        path.chmod(0o600)
        out = live.cli("send", str(b.record()["name"]), f"controller hello {word}", "--json")  # type: ignore[index]
        assert json.loads(out.stdout)["state"] == "queued", (out.stdout, out.stderr)
        seen = b.wait_seen(f"controller hello {word}").raw
        assert 'origin=\\"controller\\" controller=\\"crosstalk\\"' in seen
    finally:
        path.unlink()
