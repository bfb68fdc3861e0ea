"""Gemini CLI for real: the pinned 0.61.0 TUI in tmux with crosstalk installed the README's way (`crosstalk install
gemini`), against the Gemini API mock that records every request; the tests assert what each model saw and the one
state each send answered. A message reaches Gemini's model only through crosstalk's hooks: with a tool result in
the running turn (AfterTool), or with the user's next prompt (BeforeAgent). One module's sessions are shared by its
tests (each test uses its own tokens): a Gemini session with crosstalk and a headless Claude Code session with
crosstalk."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live_claude import CROSSTALK, LiveClaude
from tests.support.live_gemini import LiveGemini, answer_of

pytestmark = pytest.mark.timeout(300)


class Live:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.run_dir = root / "grun"
        self.run_dir.mkdir(mode=0o700)
        self.closers: list[Any] = []
        self.names: dict[str, str] = {}

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.root), "CROSSTALK_HOME": str(self.root / "xt"),
               "CROSSTALK_GEMINI_RUN_DIR": str(self.run_dir), "USER": "tester"}  # fmt: skip
        return subprocess.run([str(CROSSTALK), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(autouse=True)
def _clis(require: Callable[[str], Path]) -> None:
    require("gemini")
    require("claude")


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    root = Path(tempfile.mkdtemp(prefix="xg", dir="/tmp"))  # short: unix socket paths stay under 108 bytes
    world = Live(root)
    try:
        yield world
    finally:
        for close in reversed(world.closers):
            close()
        shutil.rmtree(root, ignore_errors=True)


REMOTE = "reviewer"  # a crosstalk agent (fake harness) the Gemini session has as an A2A remote agent


def remote_agent_file(card_url: str) -> str:
    """The agent file docs/gemini.md tells a user to add for one crosstalk agent."""
    return (f"---\nkind: remote\nname: {REMOTE}\nagent_card_url: {card_url}\nauth:\n  type: http\n"
            f"  scheme: Bearer\n  token: \"!{CROSSTALK} gemini token\"\n---\n")  # fmt: skip


def gemini(live: Live) -> LiveGemini:
    """The Gemini session with crosstalk, registered (its first crosstalk tool call); with a crosstalk agent as a
    remote agent (an agent file names its card), started first: Gemini reads its agent files when it starts."""
    if not hasattr(live, "g"):
        out = live.cli("agent", "start", "--harness", "fake", "--name", REMOTE, "--inbox", str(live.root / "r.jsonl"),
                       "--json")  # fmt: skip
        assert out.returncode == 0, out.stderr
        live.closers.append(lambda: live.cli("agent", "stop", REMOTE))
        card = json.loads(out.stdout)["a2a_url"].rstrip("/") + "/.well-known/agent-card.json"
        g = LiveGemini.start(live.root / "g", crosstalk_home=live.root / "xt", run_dir=live.run_dir,
                             agents={REMOTE: remote_agent_file(card)})  # fmt: skip
        live.closers.append(g.close)
        live.g = g  # type: ignore[attr-defined]
        g.say("CALL mcp_crosstalk_list_agents {}")
        live.names["g"] = next(r for r in g.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
    return live.g  # type: ignore[attr-defined,no-any-return]


def claude(live: Live) -> LiveClaude:
    if not hasattr(live, "c"):
        c = LiveClaude.start(live.root / "c", crosstalk_home=live.root / "xt", config_dir=live.root / "claude",
                             extra_env={"CROSSTALK_GEMINI_RUN_DIR": str(live.run_dir)})  # fmt: skip
        live.closers.append(c.close)
        live.c = c  # type: ignore[attr-defined]
        c.say("CALL mcp__crosstalk__list_agents {}")
        live.names["c"] = next(r for r in c.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
    return live.c  # type: ignore[attr-defined,no-any-return]


def wait_idle(g: LiveGemini, timeout: float = 60) -> None:
    """Until the session's turn ended (crosstalk's AfterAgent hook ran: its record says so)."""
    deadline = time.monotonic() + timeout
    while (g.record() or {}).get("event") != "AfterAgent":
        assert time.monotonic() < deadline, g.tail()
        time.sleep(0.05)


def parts_with(g: LiveGemini, needle: str) -> int:
    """How many parts of the session's newest request carry `needle`: 1 when the model read it once."""
    newest = g.requests()[-1].body.get("contents") or []
    return sum(needle in json.dumps(part) for content in newest for part in content.get("parts") or [])


def late_outcome(live: Live, name: str, message_id: str, timeout: float = 30) -> dict[str, Any]:
    """The later word on `message_id` in agent `name`'s journal (`crosstalk tail --json`)."""
    deadline = time.monotonic() + timeout
    while True:
        out = live.cli("tail", name, "--json", "-n", "500", "--for", "0.1")
        for line in out.stdout.splitlines():
            rec = json.loads(line)
            if rec.get("message_id") == message_id and (rec.get("evidence") or {}).get("late"):
                return dict(rec)
        assert time.monotonic() < deadline, (out.stdout[-2000:], out.stderr)
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------------------------------------
def test_a_shell_send_to_an_idle_gemini_is_queued_then_seen_with_the_next_prompt(live: Live):
    g = gemini(live)
    wait_idle(g)
    token = secrets.token_hex(4)
    out = live.cli("send", live.names["g"], f"build 481 failed {token}", "--json")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["state"] == "queued" and "with the user's next prompt" in answer["reason"], answer
    assert "Nothing can start a turn in an idle Gemini CLI session" in answer["reason"]
    assert not any(token in r.raw for r in g.requests())  # idle: nothing reached the model yet
    n = len(g.requests())
    g.say(f"what is new {token}-prompt")
    seen = g.wait_seen(f"build 481 failed {token}", after=n)
    assert f"{token}-prompt" in seen.raw and "<hook_context>" in seen.raw  # BeforeAgent: appended to the prompt
    assert f'message-id=\\"{answer["message_id"]}\\"' in seen.raw and 'from-name=\\"@cli:tester\\"' in seen.raw
    wait_idle(g)
    g.say(f"and now {token}-again")
    g.wait_seen(f"{token}-again")
    assert parts_with(g, f"build 481 failed {token}") == 1  # seen once: in the history, never handed over again
    rows = [r for r in json.loads(live.cli("list", "--json").stdout) if r["name"] == live.names["g"]]
    assert [(r["harness"], r["crosstalk"], r["reachable"]) for r in rows] == [("gemini", True, True)], rows
    snap = json.loads(live.cli("watch", "--once", "--json").stdout)  # `watch` shows the agent
    assert any(a["name"] == live.names["g"] and a["harness"] == "gemini" for a in snap["agents"]), snap["agents"]
    late = late_outcome(live, live.names["g"], answer["message_id"])  # the hand-over settled it in the journal
    assert late["state"] == "accepted" and late["evidence"]["gemini"] == "BeforeAgent", late


def test_claude_to_an_idle_gemini_is_queued_seen_at_the_next_prompt_and_claude_is_told(live: Live):
    g, c = gemini(live), claude(live)
    wait_idle(g)
    token = secrets.token_hex(4)
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': live.names['g'], 'text': f'idle hello {token}'})}")
    answer = c.wait_tool_result("send_message", after=n)
    assert answer["state"] == "queued" and "with the user's next prompt" in answer["reason"], answer
    assert answer["settles"] == "crosstalk tells the sender when the hook hands it to the model", answer
    assert not any(f"idle hello {token}" in r.raw for r in g.requests())
    m = len(g.requests())
    g.say(f"good morning {token}")
    seen = g.wait_seen(f"idle hello {token}", after=m)
    assert f"good morning {token}" in seen.raw and f'from-name=\\"{live.names["c"]}\\"' in seen.raw
    told = f"your message {answer['message_id']} to {live.names['g']}, queued for its model, was delivered"
    c.wait_seen(f"{told} (handed to the Gemini model with the user's prompt, at the start of a turn (BeforeAgent")


def test_claude_to_gemini_mid_turn_is_seen_at_the_next_tool_boundary_once(live: Live):
    g, c = gemini(live), claude(live)
    token = secrets.token_hex(4)
    g.mock.scripts_by[f"slow turn {token}"] = 'CALL run_shell_command {"command": "sleep 6"}'
    wait_idle(g)
    n = len(g.requests())
    g.say(f"slow turn {token}")
    g.wait_seen(f"slow turn {token}", after=n)  # the model asked for the slow shell call: the turn is running
    m = len(c.requests())
    c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': live.names['g'], 'text': f'mid turn {token}'})}")
    answer = c.wait_tool_result("send_message", after=m)
    assert answer["state"] == "queued" and "when the running tool call returns" in answer["reason"], answer
    seen = g.wait_seen(f"mid turn {token}", after=n)
    newest = seen.body["contents"][-1]["parts"]
    response = json.dumps(newest)
    assert "functionResponse" in response and f"mid turn {token}" in response  # rode the shell call's result
    assert seen.raw.count(f"slow turn {token}") >= 1 and parts_with(g, f"mid turn {token}") == 1


def test_gemini_to_claude_by_name(live: Live):
    g, c = gemini(live), claude(live)
    token = secrets.token_hex(4)
    wait_idle(g)
    n = len(g.requests())
    g.say(f"CALL mcp_crosstalk_send_message {json.dumps({'to': live.names['c'], 'text': f'hello claude {token}'})}")
    assert g.wait_tool_result("send_message", after=n)["state"] == "accepted"
    seen = c.wait_seen(f"hello claude {token}").raw
    assert f'from-name=\\"{live.names["g"]}\\"' in seen or live.names["g"] in seen


def test_an_ask_from_claude_is_answered_by_gemini_with_reply(live: Live):
    g, c = gemini(live), claude(live)
    wait_idle(g)
    token = secrets.token_hex(4)
    answer = json.dumps({"message_id": "$MESSAGE_ID", "text": f"use main {token}"})
    ask = {"to": live.names["g"], "text": f"which branch {token}?\nCALL mcp_crosstalk_reply {answer}",
           "deadline_seconds": 120}  # fmt: skip
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__ask {json.dumps(ask)}")
    ask_id = c.wait_tool_result("ask", after=n)["message_id"]
    m = len(g.requests())
    g.say(f"anything for me {token}")
    seen = g.wait_seen(f"which branch {token}?", after=m).raw
    assert f"answer with the crosstalk reply tool, message_id {ask_id}" in seen
    assert g.wait_tool_result("reply", after=m)["state"] == "replied"
    got = c.wait_seen(f'in-reply-to=\\"{ask_id}\\"', after=n).raw  # the reply, not the ask that carried its text
    assert f"use main {token}" in got and live.names["g"] in got


def test_watch_in_tmux_shows_the_gemini_agent_and_a_message_queued_for_it(live: Live):
    from tests.support.watch import lines_with, wait_line, watch_pane

    g = gemini(live)
    wait_idle(g)
    name, token = live.names["g"], secrets.token_hex(4)
    env = {"HOME": str(live.root), "CROSSTALK_HOME": str(live.root / "xt"),
           "CROSSTALK_GEMINI_RUN_DIR": str(live.run_dir)}  # fmt: skip
    with watch_pane(CROSSTALK, env, live.root, f"xw-{live.root.name}") as pane:
        row = wait_line(pane, name, "gemini", "yes")  # its agent: live, reachable
        assert str(g.agent().pid) in row, row
        traffic = ("@cli:tester (external)", name, "inform", "queued")  # the traffic table's row (no text)
        before = lines_with(pane.screen(), *traffic)
        out = live.cli("send", name, f"watched {token}", "--json")
        assert json.loads(out.stdout)["state"] == "queued", (out.stdout, out.stderr)
        wait_line(pane, *traffic, besides=before)
        pane.tmux("send-keys", "-t", pane.name, "q")
    g.say(f"next {token}")  # its user's next prompt carries it (and empties its queue for the tests after this one)
    g.wait_seen(f"watched {token}")


def test_gemini_reaches_a_crosstalk_agent_as_an_a2a_remote_agent_sent_as_its_own_agent(live: Live):
    """Gemini's model invokes the crosstalk agent its agent file names (`invoke_agent`): Gemini's A2A client (0.3)
    posts the query to that agent with the token `crosstalk gemini token` printed, so it arrives as a message from
    the Gemini session's own crosstalk agent; the call returns to the model once the task completed, with no output
    (an inform has no answer)."""
    g = gemini(live)
    wait_idle(g)
    token = secrets.token_hex(4)
    n = len(g.requests())
    g.say(f"CALL invoke_agent {json.dumps({'agent_name': REMOTE, 'prompt': f'please review {token}'})}")
    inbox = live.root / "r.jsonl"
    deadline = time.monotonic() + 60
    while not (inbox.exists() and token in inbox.read_text()):
        assert time.monotonic() < deadline, g.tail()
        time.sleep(0.1)
    [got] = [json.loads(line) for line in inbox.read_text().splitlines() if token in line]
    assert got["text"] == f"please review {token}" and got["kind"] == "inform", got
    assert (got["from"], got["sender_class"]) == (live.names["g"], "verified"), got  # the Gemini session's agent
    deadline = time.monotonic() + 60
    while not g.tool_results("invoke_agent", after=n):  # the call's result reached the model
        assert time.monotonic() < deadline, g.tail()
        time.sleep(0.1)
    assert [json.loads(r) for r in g.tool_results("invoke_agent", after=n)] == [{"output": ""}]
    wait_idle(g)


def test_a_killed_shim_comes_back_as_the_same_agent_with_its_name(live: Live):
    """The Gemini session's crosstalk MCP child is killed (-9); after `/mcp refresh` Gemini starts it again, and the
    next crosstalk call finds the same agent (same agent_id and name, its journal replayed); messages reach it."""
    import signal

    from crosstalk.fs.procinfo import pid_alive

    g = gemini(live)
    wait_idle(g)
    old = g.agent()
    os.kill(old.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while pid_alive(old.pid):
        assert time.monotonic() < deadline, f"shim {old.pid} still running 30 s after SIGKILL"
        time.sleep(0.01)
    token = secrets.token_hex(4)
    g.say("/mcp refresh")  # Gemini does not start a crashed MCP server again by itself: its user refreshes them
    deadline = time.monotonic() + 60
    while "crosstalk - Ready" not in g.screen():  # keys typed while it reloads are lost
        assert time.monotonic() < deadline, g.tail()
        time.sleep(0.05)
    deadline = time.monotonic() + 90
    while True:  # until the refreshed server answers (a call before it is up fails with Gemini's tool error)
        n = len(g.requests())
        g.say("CALL mcp_crosstalk_list_agents {}")
        wait_idle(g)
        texts = g.tool_results("mcp_crosstalk_list_agents", after=n)
        if texts and "agents" in (answer_of(json.loads(texts[-1])) or {}):
            break
        assert time.monotonic() < deadline, (texts, g.tail())
    new = g.agent()
    assert new.agent_id == old.agent_id and new.pid != old.pid and new.name == old.name == live.names["g"]
    out = live.cli("send", live.names["g"], f"after the restart {token}", "--json")
    assert json.loads(out.stdout)["state"] == "queued", (out.stdout, out.stderr)
    g.say(f"still there {token}")
    g.wait_seen(f"after the restart {token}")


def test_gemini_to_codex_and_pi_by_name(live: Live, require: Callable[[str], Path]):
    from tests.support.live_codex import LiveCodex
    from tests.support.live_pi import LivePi

    require("codex")
    require("pi")
    g = gemini(live)
    cx = LiveCodex.start(live.root / "cx", crosstalk_home=live.root / "xt")
    live.closers.append(cx.close)
    pi = LivePi.start(live.root / "p", crosstalk_home=live.root / "xt", PI_CROSSTALK_HANDLE="pi-g")
    live.closers.append(pi.close)
    thread = cx.start_thread()
    cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
    codex_name = next(r for r in cx.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
    token = secrets.token_hex(4)
    for to, text in ((codex_name, f"to codex {token}"), ("pi-g", f"to pi {token}")):
        wait_idle(g)
        n = len(g.requests())
        g.say(f"CALL mcp_crosstalk_send_message {json.dumps({'to': to, 'text': text})}")
        assert g.wait_tool_result("send_message", after=n)["state"] in ("accepted", "queued")
    cx.wait_seen(f"to codex {token}")
    assert f"[from agents:{live.names['g']}] to pi {token}" in pi.wait_seen(f"to pi {token}").raw
