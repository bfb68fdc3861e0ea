"""Claude Code for real: the pinned `claude` runs as live sessions with crosstalk installed the README way, against
mock Anthropic servers that log every request, and each test asserts on what a session's model saw."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.live_claude import Session, bin_dir, sessions

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def root(live_root: Path, require: Callable[[str], Path]) -> Path:
    require("claude")
    return live_root


def register(s: Session) -> str:
    """The session calls list_agents once: its agent exists from then on. Returns its name."""
    n = len(s.requests())
    s.say("CALL mcp__crosstalk__list_agents {}")
    s.wait_tool_result("list_agents", after=n)
    return s.agent().name


def test_a_message_by_name_lands_in_an_idle_session(root: Path):
    from crosstalk.harness.claude.install import SKILL

    with sessions(root, "alpha", "beta") as live:
        a, b = live["alpha"], live["beta"]
        b_name = register(b)
        # What the model reads, installed the README way: the crosstalk tools, and the skill listed by its
        # description (its body loads when the model invokes it).
        first = b.requests()[0]
        tools = {t["name"] for t in first.body.get("tools", [])}
        assert {f"mcp__crosstalk__{t}" for t in ("list_agents", "send_message", "ask", "reply")} <= tools
        description = SKILL.read_text().split("description: ", 1)[1].split("\n", 1)[0]
        assert f"crosstalk: {description}" in json.dumps(first.body).replace("\\n", "\n")
        token = secrets.token_hex(6)
        before = len(b.requests())
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': b_name, 'text': f'hello beta {token}'})}")
        result = a.wait_tool_result("send_message")
        assert result["state"] == "accepted", result
        seen = b.wait_seen(f"hello beta {token}", after=before)
        newest = json.dumps(seen.body["messages"][-1])
        a_name = a.agent().name
        assert f'from-name=\\"{a_name}\\"' in newest and "cross-session-message" in newest
        assert f'message-id=\\"{result["message_id"]}\\"' in newest


def newest_text(req) -> str:
    return json.dumps(req.body["messages"][-1])


def test_a_message_to_a_session_mid_tool_call_joins_its_running_turn_once(root: Path):
    """auto delivery into a busy session: at its next tool boundary, inside the running turn, the slow tool call
    intact (its real result comes back), and the message is in the conversation exactly once."""
    with sessions(root, "alpha", "beta") as live:
        a, b = live["alpha"], live["beta"]
        b_name = register(b)
        a.say("CALL mcp__crosstalk__list_agents {}")
        a.wait_tool_result("list_agents")
        token = secrets.token_hex(6)
        calls = len(b.mock.tool_calls)
        b.say('CALL Bash {"command": "sleep 4; echo slept-' + token + '", "description": "slow step"}')
        _wait(lambda: len(b.mock.tool_calls) > calls and b.mock.tool_calls[-1]["name"] == "Bash")
        assert (b.record() or {}).get("status") == "busy"
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': b_name, 'text': f'mid-turn note {token}'})}")
        assert a.wait_tool_result("send_message")["state"] == "accepted"
        seen = b.wait_seen(f"mid-turn note {token}")
        last = seen.body["messages"][-1]
        results = [x for x in last["content"] if isinstance(x, dict) and x.get("type") == "tool_result"]
        assert results and f"slept-{token}" in json.dumps(results), "the tool call was not completed"
        assert f"mid-turn note {token}" in json.dumps(results)  # delivered with the tool result, in the turn
        b.wait_seen("MOCK-REPLY", after=b.requests().index(seen))  # the turn goes on
        final = b.requests()[-1]
        assert json.dumps(final.body["messages"]).count(f"mid-turn note {token}") == 1


def test_ask_reply_and_a_native_answer_bounced(root: Path):
    """B gets an ask, first answers natively with SendMessage to the envelope's address (bounced back into B,
    listing the open ask, nothing forwarded), then with the reply tool: A's model sees the answer with in_reply_to."""
    with sessions(root, "alpha", "beta") as live:
        a, b = live["alpha"], live["beta"]
        b_name = register(b)
        token = secrets.token_hex(6)
        native = json.dumps({"to": "$FROM", "message": f"natively {token}"})
        text = f"what is six times seven?\nCALL SendMessage {native}"
        a.say(f"CALL mcp__crosstalk__ask {json.dumps({'to': b_name, 'text': text, 'deadline_seconds': 120})}")
        asked = a.wait_tool_result("ask")
        assert asked["state"] in ("submitted", "accepted"), asked
        ask_id = asked["message_id"]
        bounce = b.wait_seen("your native message was not delivered to anyone")
        bounced = newest_text(bounce)
        assert f"natively {token}" in bounced, bounced[-3000:] and ask_id in bounced and "reply tool" in bounced
        # Nothing forwarded: A's model never got it (only A's own ask, which held the script, carries the words).
        delivered = [
            m for r in a.requests() for m in map(json.dumps, r.body["messages"])
            if f"natively {token}" in m and "cross-session-message" in m
        ]  # fmt: skip
        assert not delivered
        n = len(a.requests())
        answer = json.dumps({"message_id": ask_id, "text": f"forty-two {token}"})
        b.say(f"CALL mcp__crosstalk__reply {answer}")
        replied = b.wait_tool_result("reply")
        assert replied["state"] == "replied" and replied["forwarded"]["state"] == "accepted", replied
        seen = a.wait_seen(f"forty-two {token}", after=n)
        assert f'in-reply-to=\\"{ask_id}\\"' in newest_text(seen)


def test_crosstalk_send_from_a_shell_lands_in_the_session(root: Path):
    import subprocess

    with sessions(root, "beta") as live:
        b = live["beta"]
        b_name = register(b)
        token = secrets.token_hex(6)
        env = {"PATH": b.env["PATH"], "HOME": b.env["HOME"], "CROSSTALK_HOME": b.env["CROSSTALK_HOME"]}
        res = subprocess.run(
            [str(bin_dir().parents[2] / ".venv" / "bin" / "crosstalk"), "send", b_name, f"build 481 failed {token}",
             "--from", "@ci:build"], env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert res.returncode == 0 and res.stdout.startswith("accepted"), res.stdout + res.stderr
        seen = b.wait_seen(f"build 481 failed {token}")
        assert 'from-name=\\"@ci:build\\"' in newest_text(seen) and 'sender-class=\\"external\\"' in newest_text(seen)


def _wait(predicate, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_the_interactive_tui_in_tmux_receives_a_message_and_shows_it(root: Path):
    import time

    with sessions(root, "alpha", "beta", beta={"tui": True}) as live:
        a, b = live["alpha"], live["beta"]
        b_name = register(b)
        token = secrets.token_hex(6)
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': b_name, 'text': f'to the tui {token}'})}")
        assert a.wait_tool_result("send_message")["state"] == "accepted"
        b.wait_seen(f"to the tui {token}")
        deadline = time.monotonic() + 30
        while "MOCK-REPLY" not in b.screen().split("to the tui")[-1]:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, b.tail()
            time.sleep(0.1)


def test_clear_keeps_the_name_for_the_new_session(root: Path):
    """/clear starts a new session id in the same Claude process: its next call binds the new session, which takes
    the name (the old session's agent is retired on the record's proof), and a message by name reaches it."""
    import time

    with sessions(root, "alpha", "beta") as live:
        a, b = live["alpha"], live["beta"]
        name = register(b)
        old = b.agent()
        first = (b.record() or {})["sessionId"]
        b.say("/clear")
        deadline = time.monotonic() + 30
        while (b.record() or {}).get("sessionId") == first:
            assert time.monotonic() < deadline, "no new session id after /clear\n" + b.tail()
            time.sleep(0.05)
        n = len(b.requests())
        b.say("CALL mcp__crosstalk__list_agents {}")
        listed = b.wait_tool_result("list_agents", after=n)
        new = b.agent()
        assert new.name == name and new.agent_id != old.agent_id and new.session_ref != old.session_ref
        assert [r["name"] for r in listed["agents"] if r.get("self")] == [name]
        assert [r["name"] for r in listed["agents"]].count(name) == 1
        token = secrets.token_hex(6)
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': name, 'text': f'after clear {token}'})}")
        assert a.wait_tool_result("send_message")["state"] == "accepted"
        b.wait_seen(f"after clear {token}")


def test_a_session_without_crosstalk_is_listed_and_receives(root: Path):
    """gamma runs without crosstalk: list_agents shows it (crosstalk false, reachable), a message by name from a
    crosstalk session lands in it as Claude's own peers write it, an ask to it is refused (inform only), and
    `crosstalk send` reaches it too."""
    import subprocess

    with sessions(root, "alpha", "gamma", gamma={"install": False}) as live:
        a, g = live["alpha"], live["gamma"]
        g.say("hello")  # gamma is up (its registry record is written at start)
        g_name = (g.record() or {}).get("name") or _wait_record(g)
        listed = {r["name"]: r for r in a.wait_tool_result("list_agents", after=_call(a, "list_agents", {}))["agents"]}
        assert listed[g_name]["crosstalk"] is False and listed[g_name]["reachable"] is True, listed
        token = secrets.token_hex(6)
        n = _call(a, "send_message", {"to": g_name, "text": f"to a plain session {token}"})
        sent = a.wait_tool_result("send_message", after=n)
        assert sent["state"] == "accepted" and sent["native"] is True, sent
        seen = g.wait_seen(f"to a plain session {token}")
        newest = newest_text(seen)
        assert f'from-name=\\"{a.agent().name}\\"' in newest and 'from-mode=\\"bypass\\"' in newest
        n = _call(a, "ask", {"to": g_name, "text": "are you there?"})
        asked = a.wait_tool_result("ask", after=n)
        assert (asked["state"], asked["reason"]) == ("rejected", "kind:native_inform_only"), asked
        # From a shell: the CLI is no Claude session, so it asserts no permission mode, and gamma (running with
        # bypass permissions) holds it for its user: Claude's receipt says so, and so does the sender's answer
        # (exit 5), never "accepted".
        env = {"PATH": a.env["PATH"], "HOME": a.env["HOME"], "CROSSTALK_HOME": a.env["CROSSTALK_HOME"],
               "CLAUDE_CONFIG_DIR": a.env["CLAUDE_CONFIG_DIR"]}  # fmt: skip
        res = subprocess.run(
            [str(bin_dir().parents[2] / ".venv" / "bin" / "crosstalk"), "send", g_name, f"from a shell {token}"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert res.returncode == 5 and res.stdout.startswith("held ") and f"→ {g_name}: held" in res.stdout, res


def _call(s, tool: str, args: dict) -> int:
    n = len(s.requests())
    s.say(f"CALL mcp__crosstalk__{tool} {json.dumps(args)}")
    return n


def _wait_record(s) -> str:
    import time

    deadline = time.monotonic() + 30
    while not (s.record() or {}).get("name"):
        assert time.monotonic() < deadline, s.tail()
        time.sleep(0.05)
    return s.record()["name"]


def test_a_crosstalk_agent_published_as_a_native_peer_takes_claudes_own_sendmessage(root: Path):
    """Opt-in (`crosstalk install claude --native-peers`): a fake-harness agent started with `crosstalk agent run`
    is listed by Claude's own ListAgents and reached by its SendMessage, no crosstalk tool involved; the message
    runs the receiver chain with the sender its socket proves (the Claude session, verified through its shim)."""
    import subprocess
    import time

    with sessions(root, "alpha") as live:
        a = live["alpha"]
        a_name = register(a)
        env = {"PATH": a.env["PATH"], "HOME": a.env["HOME"], "CROSSTALK_HOME": a.env["CROSSTALK_HOME"],
               "CLAUDE_CONFIG_DIR": a.env["CLAUDE_CONFIG_DIR"]}  # fmt: skip
        crosstalk = str(bin_dir().parents[2] / ".venv" / "bin" / "crosstalk")
        subprocess.run([crosstalk, "install", "claude", "--native-peers"], env=env, check=True, timeout=60,
                       capture_output=True)  # fmt: skip
        inbox = root / "helper.jsonl"
        argv = [crosstalk, "agent", "run", "--harness", "fake", "--name", "helper", "--inbox", str(inbox), "--json"]
        agent = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            assert agent.stdout is not None and json.loads(agent.stdout.readline())["event"] == "ready"
            n = len(a.requests())
            a.say("CALL ListAgents {}")
            deadline = time.monotonic() + 30
            while not any("tool_result" in newest_text(r) and "helper" in newest_text(r) for r in a.requests()[n:]):
                assert time.monotonic() < deadline, "Claude's ListAgents did not list helper\n" + a.tail()
                time.sleep(0.05)
            token = secrets.token_hex(6)
            a.say("CALL SendMessage " + json.dumps({"to": "helper", "message": f"natively to a fake {token}"}))
            deadline = time.monotonic() + 30
            while not (inbox.exists() and token in inbox.read_text()):
                assert time.monotonic() < deadline, newest_text(a.requests()[-1])[-1500:]
                time.sleep(0.05)
            [line] = [json.loads(x) for x in inbox.read_text().splitlines() if token in x]
            assert (line["from"], line["sender_class"]) == (a_name, "verified")
            assert line["text"] == f"natively to a fake {token}"
        finally:
            agent.terminate()
            agent.wait(20)
            if agent.stdout is not None:
                agent.stdout.close()
        sessions_dir = Path(a.env["CLAUDE_CONFIG_DIR"]) / "sessions"
        assert not [p for p in sessions_dir.glob("*.json") if "crosstalk-peer" in p.read_text()]  # unpublished


def test_a_restarted_shim_resumes_its_journal_and_a_reply_to_a_pre_restart_ask_routes(root: Path):
    """B's shim is killed (-9) while B owes A an answer; Claude starts a new shim at B's next crosstalk call, which
    finds the same agent (same agent_id, the journal replayed), and B's reply to the pre-restart ask reaches A."""
    import os
    import signal
    import time

    from crosstalk.fs.procinfo import pid_alive

    with sessions(root, "alpha", "beta") as live:
        a, b = live["alpha"], live["beta"]
        b_name = register(b)
        token = secrets.token_hex(6)
        n = _call(a, "ask", {"to": b_name, "text": f"before the restart {token}", "deadline_seconds": 300})
        ask_id = a.wait_tool_result("ask", after=n)["message_id"]
        b.wait_seen(f"before the restart {token}")
        old = b.agent()
        os.kill(old.pid, signal.SIGKILL)  # the shim dies; its Claude session lives on
        # kill() only queues the signal: on a loaded machine the shim can still be running (its pipe to Claude
        # open) when the next call is made, and Claude writes that call to a process about to die, which fails the
        # call instead of starting a new shim. A crash is in the past when the next call comes: wait for it.
        deadline = time.monotonic() + 30
        while pid_alive(old.pid):  # a zombie counts as gone: its descriptors are closed before it becomes one
            assert time.monotonic() < deadline, f"shim {old.pid} still running 30 s after SIGKILL"
            time.sleep(0.01)
        m = _call(b, "reply", {"message_id": ask_id, "text": f"after the restart {token}"})
        # Claude learns of its MCP child's exit asynchronously: a call it makes before it has (its event loop late
        # on a loaded machine) goes to the dead pipe and answers "Connection closed" with nothing run, and the call
        # after it starts the new shim (docs/dev/claude-adapter.md). A model calls again; so does this test, once.
        if b.wait_tool_text("reply", after=m).startswith("Connection closed"):
            m = _call(b, "reply", {"message_id": ask_id, "text": f"after the restart {token}"})
        replied = b.wait_tool_result("reply", after=m)
        new = b.agent()
        assert new.agent_id == old.agent_id and new.pid != old.pid and new.name == old.name
        assert replied["state"] == "replied" and replied["forwarded"]["state"] == "accepted", replied
        seen = a.wait_seen(f"after the restart {token}")
        assert f'in-reply-to=\\"{ask_id}\\"' in newest_text(seen)
