"""Codex for real: the pinned `codex app-server` on its control socket, crosstalk set up with `crosstalk install
codex`, a mock Responses server logging every request; a Claude session messages a Codex thread by name."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.live_claude import sessions
from tests.support.live_codex import LiveCodex

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def root(live_root: Path, require: Callable[[str], Path]) -> Path:
    require("claude")
    require("codex")
    return live_root


def test_claude_to_an_idle_codex_thread_and_next_turn_is_queued(root: Path):
    with sessions(root, "alpha") as live, LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        a = live["alpha"]
        thread = cx.start_thread()
        cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
        listed = cx.wait_tool_result("list_agents")
        [me] = [r for r in listed["agents"] if r.get("self")]
        assert me["harness"] == "codex" and me["reachable"] is True, listed
        token = secrets.token_hex(6)
        n = len(cx.requests())
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': me['name'], 'text': f'to codex {token}'})}")
        sent = a.wait_tool_result("send_message")
        assert sent["state"] == "accepted", sent
        seen = cx.wait_seen(f"to codex {token}", after=n)
        assert "cross-session-message" in seen.raw


def register(cx: LiveCodex, thread: str) -> str:
    n = len(cx.requests())
    cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
    listed = cx.wait_tool_result("list_agents", after=n)
    [me] = [r for r in listed["agents"] if r.get("self")]
    return me["name"]


def user_turns_with(cx: LiveCodex, needle: str) -> list:
    return [r for r in cx.requests() if needle in r.raw]


def test_next_turn_is_queued_without_waking_the_thread_and_the_next_turn_sees_it(root: Path):

    with sessions(root, "alpha") as live, LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        a = live["alpha"]
        thread = cx.start_thread()
        name = register(cx, thread)
        cx.wait_status(thread, "idle")  # the registration turn is over
        token = secrets.token_hex(6)
        n = len(cx.requests())
        args = {"to": name, "text": f"for later {token}", "delivery": "next_turn"}
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps(args)}")
        sent = a.wait_tool_result("send_message")
        assert sent["state"] == "queued", sent
        assert cx.status(thread) == "idle"
        cx.say(thread, "what is new?")
        seen = cx.wait_seen("what is new?", after=n)
        # The next model request after the send is the user's own turn: the message woke nothing by itself.
        assert "what is new?" in cx.requests()[n].raw, "the idle thread was woken"
        assert f"for later {token}" in seen.raw  # in the history the next turn's model request carries


def test_codex_to_claude_and_an_ask_from_codex_answered_by_claude_with_reply(root: Path):
    with sessions(root, "alpha") as live, LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        a = live["alpha"]
        a.say("CALL mcp__crosstalk__list_agents {}")
        claude_name = a.wait_tool_result("list_agents")["agents"][0]["name"]
        thread = cx.start_thread()
        codex_name = register(cx, thread)
        token = secrets.token_hex(6)
        cx.say(
            thread, f"CALL mcp__crosstalk.send_message {json.dumps({'to': claude_name, 'text': f'hi claude {token}'})}"
        )
        seen = a.wait_seen(f"hi claude {token}")
        assert f'from-name=\\"{codex_name}\\"' in json.dumps(seen.body["messages"][-1])
        reply = json.dumps({"message_id": "$MESSAGE_ID", "text": f"forty-two {token}"})
        ask = {
            "to": claude_name,
            "text": f"six times seven?\nCALL mcp__crosstalk__reply {reply}",
            "deadline_seconds": 120,
        }
        n = len(cx.requests())
        cx.say(thread, f"CALL mcp__crosstalk.ask {json.dumps(ask)}")
        asked = cx.wait_tool_result("ask", after=n)
        assert asked["state"] in ("submitted", "accepted"), asked
        answer = cx.wait_seen(f'in-reply-to=\\"{asked["message_id"]}\\"', after=n)  # the reply, as an envelope
        assert f"forty-two {token}" in answer.raw


def test_crosstalk_send_from_a_shell_is_appended_to_the_thread_without_a_turn(root: Path):
    """An unverified sender never starts a turn: its message is appended (queued) and the next turn sees it."""
    import subprocess

    with LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        thread = cx.start_thread()
        name = register(cx, thread)
        cx.wait_status(thread, "idle")
        n = len(cx.requests())
        token = secrets.token_hex(6)
        env = {"PATH": cx.env["PATH"], "HOME": cx.env["HOME"], "CROSSTALK_HOME": cx.env["CROSSTALK_HOME"]}
        crosstalk = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "crosstalk")
        res = subprocess.run([crosstalk, "send", name, f"ci says {token}", "--from", "@ci:build"], env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert res.returncode == 0 and res.stdout.startswith("queued"), res.stdout + res.stderr
        assert cx.status(thread) == "idle"
        cx.say(thread, "anything from ci?")
        assert f"ci says {token}" in cx.wait_seen("anything from ci?", after=n).raw
        assert "anything from ci?" in cx.requests()[n].raw, "the message started a turn of its own"


def test_two_threads_on_one_app_server_never_cross(root: Path):
    with sessions(root, "alpha") as live, LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        a = live["alpha"]
        t1, t2 = cx.start_thread(), cx.start_thread()
        n1, n2 = register(cx, t1), register(cx, t2)
        assert n1 != n2
        token = secrets.token_hex(6)
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': n2, 'text': f'only for two {token}'})}")
        assert a.wait_tool_result("send_message")["state"] == "accepted"
        seen = cx.wait_seen(f"only for two {token}")
        # The model request that carried it is thread two's (Codex names the thread in every request), never one's.
        assert t2 in seen.raw and t1 not in seen.raw
        assert not [r for r in cx.requests() if f"only for two {token}" in r.raw and t1 in r.raw]


@pytest.mark.parametrize("delivery", ["steer", "auto"])
def test_a_message_to_a_codex_thread_mid_turn_joins_the_running_turn(root: Path, delivery: str):
    """steer → turn/steer into the running turn; auto → turn/start, which a running turn takes as a steer. Either
    way the thread's model sees it in the same turn (no turn of its own)."""

    with sessions(root, "alpha") as live, LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        a = live["alpha"]
        a.say("CALL mcp__crosstalk__list_agents {}")
        a.wait_tool_result("list_agents")
        thread = cx.start_thread()
        name = register(cx, thread)
        cx.wait_status(thread, "idle")
        cx.say(thread, "SLEEP 4\na slow turn")
        cx.wait_status(thread, "active", timeout=30)
        token = secrets.token_hex(6)
        args = {"to": name, "text": f"steer {token}", "delivery": delivery}
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps(args)}")
        sent = a.wait_tool_result("send_message")
        assert sent["state"] == "accepted", sent
        cx.wait_seen(f"steer {token}")
        turns = cx.request("thread/read", {"threadId": thread, "includeTurns": True})["thread"]["turns"]
        holding = [t for t in turns if f"steer {token}" in json.dumps(t)]
        assert len(holding) == 1 and "a slow turn" in json.dumps(holding[0]), "it did not join the running turn"


def test_a_loaded_thread_without_crosstalk_is_listed_and_receives_natively(root: Path):
    """Thread two never called crosstalk (no agent): list_agents shows it as a native row, reachable, and a message
    by that name lands in it (turn/start from the sender's side, inform only)."""
    import time

    with LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        t1, t2 = cx.start_thread(), cx.start_thread()
        register(cx, t1)
        n = len(cx.requests())
        cx.say(t1, "CALL mcp__crosstalk.list_agents {}")
        rows = cx.wait_tool_result("list_agents", after=n)["agents"]
        [native] = [r for r in rows if r["harness"] == "codex" and not r["crosstalk"]]
        assert native["reachable"] is True and native["name"].startswith("codex-"), rows
        token = secrets.token_hex(6)
        m = len(cx.requests())
        cx.say(t1, f"CALL mcp__crosstalk.send_message {json.dumps({'to': native['name'], 'text': f'native {token}'})}")
        sent = cx.wait_tool_result("send_message", after=m)
        assert sent["state"] == "accepted" and sent["native"] is True, sent
        deadline = time.monotonic() + 30  # thread two's own model request (Codex names the thread in each one)
        while not [r for r in cx.requests()[m:] if f"native {token}" in r.raw and t2 in r.raw]:
            assert time.monotonic() < deadline, cx.tail()
            time.sleep(0.05)
        turns = cx.request("thread/read", {"threadId": t2, "includeTurns": True})["thread"]["turns"]
        assert any(f"native {token}" in json.dumps(t) and "cross-session-message" in json.dumps(t) for t in turns)


def test_the_interactive_codex_tui_attached_to_the_control_socket_receives(root: Path):
    import time

    with sessions(root, "alpha") as live, LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        a = live["alpha"]
        tui = cx.attach_tui()
        try:
            tui.say("CALL mcp__crosstalk.list_agents {}")
            listed = cx.wait_tool_result("list_agents")
            [me] = [r for r in listed["agents"] if r.get("self")]
            token = secrets.token_hex(6)
            a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': me['name'], 'text': f'to the tui {token}'})}")
            assert a.wait_tool_result("send_message")["state"] == "accepted"
            cx.wait_seen(f"to the tui {token}")
            deadline = time.monotonic() + 30
            while token not in tui.screen():
                assert time.monotonic() < deadline, tui.screen()
                time.sleep(0.1)
        finally:
            tui.close()


def test_after_a_restart_of_the_app_server_the_thread_re_registers_under_its_name_and_receives(root: Path):
    with sessions(root, "alpha") as live, LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        a = live["alpha"]
        thread = cx.start_thread()
        before = register(cx, thread)
        cx.restart()
        cx.request("thread/resume", {"threadId": thread})
        after = register(cx, thread)
        assert after == before  # same thread, same agent_id, same name
        token = secrets.token_hex(6)
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': after, 'text': f'after restart {token}'})}")
        sent = a.wait_tool_result("send_message")
        assert sent["state"] == "accepted", sent
        cx.wait_seen(f"after restart {token}")


def test_a_thread_on_a_non_default_app_server_receives_and_nothing_reaches_the_default_one(root: Path):
    """`codex app-server --listen unix://PATH`: the thread's shim finds its app-server from its parent's command
    line, binds there, and a message by name reaches that thread; the default app-server's model sees nothing."""
    with (
        sessions(root, "alpha") as live,
        LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as default,
        LiveCodex.start(root / "other", crosstalk_home=root / "xt", listen=root / "other.sock") as other,
    ):
        a = live["alpha"]
        default_thread = default.start_thread()
        register(default, default_thread)
        thread = other.start_thread()
        name = register(other, thread)
        token = secrets.token_hex(6)
        n = len(default.requests())
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': name, 'text': f'elsewhere {token}'})}")
        sent = a.wait_tool_result("send_message")
        assert sent["state"] == "accepted", sent
        other.wait_seen(f"elsewhere {token}")
        assert not [r for r in default.requests()[n:] if token in r.raw]
        # A thread there without crosstalk is found through the endpoint the registered thread's descriptor
        # records (the control socket's app-server does not have it), listed, and receives natively there.
        native = other.start_thread()
        m = len(a.requests())
        a.say("CALL mcp__crosstalk__list_agents {}")
        rows = a.wait_tool_result("list_agents", after=m)["agents"]
        [row] = [r for r in rows if r["harness"] == "codex" and not r["crosstalk"]]
        assert row["reachable"] is True and row["name"][-4:] == native.replace("-", "")[-4:], rows
        token = secrets.token_hex(6)
        n, m = len(default.requests()), len(a.requests())
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': row['name'], 'text': f'native there {token}'})}")
        sent = a.wait_tool_result("send_message", after=m + 1)  # request m still holds the earlier send's result
        assert sent["state"] == "accepted" and sent["native"] is True, sent
        other.wait_seen(f"native there {token}")
        assert not [r for r in default.requests()[n:] if token in r.raw]


def test_an_entry_without_the_shells_state_root_is_reported_never_a_silent_second_root(root: Path):
    """Codex gives its MCP children only a few variables: an entry written from a shell without CROSSTALK_HOME,
    used by a Codex started with it, would put the thread in another state root. The thread is told, in its
    registration note and in every listing; installing from the right shell fixes it."""
    import subprocess

    from tests.support.live_claude import CROSSTALK

    with LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        without = {k: v for k, v in cx.env.items() if k != "CROSSTALK_HOME"}
        subprocess.run([str(CROSSTALK), "install", "codex"], env=without, check=True, capture_output=True, timeout=60)
        cx.restart()  # the app-server (still started with CROSSTALK_HOME) reads the changed entry
        thread = cx.start_thread()
        cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
        listed = cx.wait_tool_result("list_agents")
        assert listed["warning"].startswith("state_root_mismatch:") and str(root / "xt") in listed["warning"]
        assert "state_root_mismatch" in listed["note"], listed
        subprocess.run([str(CROSSTALK), "install", "codex"], env=cx.env, check=True, capture_output=True, timeout=60)
        cx.restart()
        thread = cx.start_thread()
        n = len(cx.requests())
        cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
        fixed = cx.wait_tool_result("list_agents", after=n)
        assert "warning" not in fixed and "state_root_mismatch" not in fixed["note"], fixed


def test_after_both_harnesses_restart_both_agents_re_register_under_their_names_and_deliver(root: Path):
    """Claude is ended and resumed (`claude --resume`), the Codex app-server is stopped and started again and its
    thread resumed: each session's agent comes back under the same name and agent_id, and messages flow both ways."""
    with sessions(root, "alpha") as live, LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx:
        a = live["alpha"]
        thread = cx.start_thread()
        codex_name = register(cx, thread)
        a.say("CALL mcp__crosstalk__list_agents {}")
        claude_before = a.agent()
        codex_before = next(d for d in cx.agents() if d.session_ref == thread)
        a.restart()
        cx.restart()
        cx.request("thread/resume", {"threadId": thread})
        assert register(cx, thread) == codex_name
        n = len(a.requests())
        a.say("CALL mcp__crosstalk__list_agents {}")
        [me] = [r for r in a.wait_tool_result("list_agents", after=n)["agents"] if r.get("self")]
        claude_after = a.agent()
        assert (claude_after.agent_id, claude_after.name) == (claude_before.agent_id, claude_before.name) == (
            me["agent_id"], me["name"])  # fmt: skip
        codex_after = next(d for d in cx.agents() if d.session_ref == thread)
        assert (codex_after.agent_id, codex_after.name) == (codex_before.agent_id, codex_before.name)
        token = secrets.token_hex(6)
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': codex_name, 'text': f'to codex {token}'})}")
        cx.wait_seen(f"to codex {token}")
        cx.say(
            thread, f"CALL mcp__crosstalk.send_message {json.dumps({'to': me['name'], 'text': f'to claude {token}'})}"
        )
        a.wait_seen(f"to claude {token}")
