"""OpenCode for real: the pinned 1.18.33 (`opencode serve`, one process shared by the module's tests, each test in
sessions and with tokens of its own) with crosstalk installed the README's way (`crosstalk install opencode`),
against a mock chat-completions server that logs every request; a headless Claude Code session with crosstalk beside
it. The tests assert what each model saw and the one state each send answered."""

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
from tests.support.live_opencode import LiveOpenCode

pytestmark = pytest.mark.timeout(300)


class Live:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.closers: list[Any] = []
        self.names: dict[str, str] = {}

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.root), "CROSSTALK_HOME": str(self.root / "xt"),
               "USER": "tester", "XDG_RUNTIME_DIR": str(self.root / "o" / "run")}  # fmt: skip
        return subprocess.run([str(CROSSTALK), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(autouse=True)
def _clis(require: Callable[[str], Path]) -> None:
    require("opencode")
    require("claude")


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    root = Path(tempfile.mkdtemp(prefix="xo", dir="/tmp"))  # short: unix socket paths stay under 108 bytes
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


def opencode(live: Live) -> LiveOpenCode:
    return _lazy(live, "oc", lambda: LiveOpenCode.start(live.root / "o", crosstalk_home=live.root / "xt"))  # type: ignore[no-any-return]


def registered(live: Live, key: str) -> str:
    """A session of the shared OpenCode process, registered by its first crosstalk tool call; its id."""
    oc = opencode(live)
    if key not in live.names:
        sid = oc.new_session()
        n = len(oc.requests())
        oc.say(sid, f"register {key}\nCALL crosstalk_list_agents {{}}")
        rows = oc.wait_tool_result("list_agents", f"register {key}", after=n)["agents"]
        me = next(r for r in rows if r.get("self"))
        assert me["harness"] == "opencode" and me["reachable"] is True, me
        assert oc.agent(sid).name == me["name"]
        oc.wait_idle(sid)
        live.names[key], live.names[f"{key}.sid"] = me["name"], sid
    return live.names[f"{key}.sid"]


def claude(live: Live) -> LiveClaude:
    c = _lazy(live, "c", lambda: LiveClaude.start(live.root / "c", crosstalk_home=live.root / "xt",
                                                  config_dir=live.root / "claude"))  # fmt: skip
    if "c" not in live.names:
        c.say("CALL mcp__crosstalk__list_agents {}")
        live.names["c"] = next(r for r in c.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
    return c  # type: ignore[no-any-return]


def only_in(oc: LiveOpenCode, sid: str, needle: str) -> str:
    """The one user message of `sid` carrying `needle` (OpenCode's own record of the session)."""
    found = [m for m in oc.messages(sid) if needle in m]
    assert len(found) == 1, (needle, oc.messages(sid))
    return found[0]


# ---------------------------------------------------------------------------------------------------------------------
def test_a_shell_send_reaches_the_opencode_model_once(live: Live):
    oc, sid = opencode(live), registered(live, "a")
    token = secrets.token_hex(4)
    out = live.cli("send", live.names["a"], f"build 481 failed {token}", "--json")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["state"] == "accepted" and answer["evidence"]["opencode"] == "immediate", answer
    seen = oc.wait_seen(f"build 481 failed {token}").raw
    header = f"[crosstalk inform · from @cli:tester (external) · message-id {answer['message_id']}]\\nbuild 481"
    assert header in seen
    assert only_in(oc, sid, token).startswith("[crosstalk inform · from @cli:tester (external)")
    # `watch` shows the agent; and nothing was npm-installed on the way (the tests run offline)
    snap = json.loads(live.cli("watch", "--once", "--json").stdout)
    assert any(a["name"] == live.names["a"] and a["harness"] == "opencode" for a in snap["agents"]), snap["agents"]
    assert oc.installed_nothing() == []


def test_claude_to_opencode_idle_then_mid_turn_seen_once(live: Live):
    oc, sid, c = opencode(live), registered(live, "a"), claude(live)
    token = secrets.token_hex(4)
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': live.names['a'], 'text': f'idle hello {token}'})}")
    answer = c.wait_tool_result("send_message", after=n)
    assert answer["state"] == "accepted", answer
    seen = oc.wait_seen(f"idle hello {token}").raw
    assert f"[crosstalk inform · from agents:{live.names['c']} · message-id {answer['message_id']}]" in seen
    oc.wait_idle(sid)
    # mid-turn: OpenCode's model is inside a 6 s tool call when the message comes; it joins that turn
    n_oc = len(oc.requests())
    oc.say(sid, f'slow turn {token}\nCALL bash {{"command": "sleep 6", "description": "wait"}}')
    oc.wait_seen(f"slow turn {token}", after=n_oc)
    assert oc.busy(sid)
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': live.names['a'], 'text': f'busy hello {token}'})}")
    answer = c.wait_tool_result("send_message", after=n)
    assert answer["state"] == "queued" and "at its next step" in answer["reason"], answer
    req = oc.wait_seen(f"busy hello {token}", after=n_oc)
    roles = [m.get("role") for m in req.body["messages"]]
    assert roles[-2:] == ["tool", "user"], roles  # after the tool's result, in the same turn
    assert sum(f"busy hello {token}" in json.dumps(m) for m in req.body["messages"]) == 1
    only_in(oc, sid, f"busy hello {token}")


def test_opencode_to_claude_by_name_and_an_ask_answered_with_reply(live: Live):
    oc, sid, c = opencode(live), registered(live, "a"), claude(live)
    oc.wait_idle(sid)
    token = secrets.token_hex(4)
    n = len(oc.requests())
    oc.say(sid, f"CALL crosstalk_send_message {json.dumps({'to': live.names['c'], 'text': f'hello claude {token}'})}")
    assert oc.wait_tool_result("send_message", after=n)["state"] == "accepted"
    seen = c.wait_seen(f"hello claude {token}").raw
    assert live.names["a"] in seen
    oc.wait_idle(sid)
    # Claude asks; OpenCode's model answers with the reply tool and the id the header gave it
    reply = json.dumps({"message_id": "$MESSAGE_ID", "text": f"use main {token}"})
    oc.mock.scripts_by[f"which branch {token}?"] = f"CALL crosstalk_reply {reply}"
    n = len(c.requests())
    c.say(f"CALL mcp__crosstalk__ask {json.dumps({'to': live.names['a'], 'text': f'which branch {token}?'})}")
    ask_id = c.wait_tool_result("ask", after=n)["message_id"]
    seen = c.wait_seen(f"use main {token}").raw
    assert ask_id and live.names["a"] in seen


def test_two_sessions_of_one_opencode_never_cross(live: Live):
    oc, a, b = opencode(live), registered(live, "a"), registered(live, "b")
    assert live.names["a"] != live.names["b"] and oc.agent(a).harness_pid == oc.agent(b).harness_pid
    token = secrets.token_hex(4)
    for key in ("a", "b"):
        out = live.cli("send", live.names[key], f"for {key} {token}", "--json")
        assert json.loads(out.stdout)["state"] in ("accepted", "queued"), out.stdout
    for key, sid in (("a", a), ("b", b)):
        oc.wait_seen(f"for {key} {token}")
        only_in(oc, sid, f"for {key} {token}")
        other = "b" if key == "a" else "a"
        assert not any(f"for {other} {token}" in m for m in oc.messages(sid))
    # b's tool calls are b's: its send names b as the sender
    n = len(oc.requests())
    oc.wait_idle(b)
    oc.say(b, f"CALL crosstalk_send_message {json.dumps({'to': live.names['a'], 'text': f'from b {token}'})}")
    assert oc.wait_tool_result("send_message", f"from b {token}", after=n)["state"] in ("accepted", "queued")
    assert f"from agents:{live.names['b']}" in only_in(oc, a, f"from b {token}")


def test_a_session_without_crosstalk_yet_is_listed_and_takes_a_shell_send(live: Live):
    oc = opencode(live)
    registered(live, "a")
    sid = oc.new_session()
    rows = {row["session_ref"]: row for row in json.loads(live.cli("list", "--json").stdout) if "session_ref" in row}
    assert rows[live.names["a.sid"]]["crosstalk"] is True, rows
    row = rows[sid]
    assert row["harness"] == "opencode" and row["crosstalk"] is False and row["reachable"] is True, row
    token = secrets.token_hex(4)
    out = live.cli("send", row["name"], f"native hello {token}", "--json")
    answer = json.loads(out.stdout)
    assert answer["state"] == "accepted" and answer.get("native") is True, answer
    assert only_in(oc, sid, token).startswith("[crosstalk inform · from @cli:tester (native, unverified) · message-id")
    oc.wait_seen(f"native hello {token}")


def test_the_tui_in_tmux_takes_a_message_and_shows_it(live: Live):
    t = _lazy(live, "tui", lambda: LiveOpenCode.start(live.root / "t", crosstalk_home=live.root / "xt", tui=True))
    t.type("CALL crosstalk_list_agents {}")
    me = next(r for r in t.wait_tool_result("list_agents")["agents"] if r.get("self"))
    [session] = t.sessions()  # the TUI's own session, from the plugin (the TUI serves no port)
    assert t.agent(session["id"]).name == me["name"]
    t.wait_idle(session["id"])
    token = secrets.token_hex(4)
    out = live.cli("send", me["name"], f"tui hello {token}", "--json")
    assert json.loads(out.stdout)["state"] == "accepted", (out.stdout, out.stderr)
    t.wait_seen(f"tui hello {token}")
    deadline = time.monotonic() + 30
    while f"tui hello {token}" not in t.screen():
        assert time.monotonic() < deadline, t.tail()
        time.sleep(0.1)


def test_meta_starts_no_turn_and_next_turn_waits_for_the_running_one(live: Live):
    oc, sid = opencode(live), registered(live, "n")
    name = live.names["n"]
    oc.wait_idle(sid)
    token = secrets.token_hex(4)
    n = len(oc.requests())
    out = live.cli("send", name, f"meta note {token}", "--kind", "meta", "--json")
    assert json.loads(out.stdout)["state"] == "queued", (out.stdout, out.stderr)
    only_in(oc, sid, f"meta note {token}")  # in the session's transcript
    oc.say(sid, f"next prompt {token}")
    first = oc.wait_seen(f"meta note {token}", after=n)
    assert f"next prompt {token}" in first.raw  # no turn of its own: the model read it with the user's next prompt
    oc.wait_idle(sid)
    n = len(oc.requests())
    oc.say(sid, f'slow turn {token}\nCALL bash {{"command": "sleep 5", "description": "wait"}}')
    oc.wait_seen(f"slow turn {token}", after=n)
    out = live.cli("send", name, f"later {token}", "--delivery", "next_turn", "--json")
    answer = json.loads(out.stdout)
    assert answer["state"] == "queued" and "when this one ends" in answer["reason"], answer
    req = oc.wait_seen(f"later {token}", after=n)
    roles = [m.get("role") for m in req.body["messages"]]
    assert roles[-2:] == ["assistant", "user"], roles  # a turn of its own, after the slow one's last answer
    only_in(oc, sid, f"later {token}")


def test_opencode_to_codex_pi_and_qwen_by_name(live: Live, require: Callable[[str], Path]):
    from tests.support.live_codex import LiveCodex
    from tests.support.live_pi import LivePi
    from tests.support.live_qwen import LiveQwen

    for cli in ("codex", "pi", "qwen"):
        require(cli)
    oc, sid = opencode(live), registered(live, "a")
    cx = _lazy(live, "cx", lambda: LiveCodex.start(live.root / "cx", crosstalk_home=live.root / "xt"))
    pi = _lazy(live, "pi", lambda: LivePi.start(live.root / "p", crosstalk_home=live.root / "xt",
                                                PI_CROSSTALK_HANDLE="pi-o"))  # fmt: skip
    q = _lazy(live, "q", lambda: LiveQwen.start(live.root / "q", crosstalk_home=live.root / "xt",
                                                qwen_home=live.root / "qwen"))  # fmt: skip
    thread = cx.start_thread()
    cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
    codex_name = next(r for r in cx.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
    q.say("CALL mcp__crosstalk__list_agents {}")
    qwen_name = next(r for r in q.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
    pi.agent()
    token = secrets.token_hex(4)
    for to, text in ((codex_name, f"to codex {token}"), ("pi-o", f"to pi {token}"), (qwen_name, f"to qwen {token}")):
        oc.wait_idle(sid)
        n = len(oc.requests())
        oc.say(sid, f"CALL crosstalk_send_message {json.dumps({'to': to, 'text': text})}")
        assert oc.wait_tool_result("send_message", text, after=n)["state"] in ("accepted", "queued")
    cx.wait_seen(f"to codex {token}")
    assert f"[from agents:{live.names['a']}] to pi {token}" in pi.wait_seen(f"to pi {token}").raw
    seen = q.wait_seen(f"to qwen {token}").raw  # Qwen's model reads crosstalk's header naming the OpenCode session
    assert f"[crosstalk inform · from agents:{live.names['a']} · message-id " in seen, seen[-2000:]


def test_watch_in_tmux_shows_the_opencode_agent_and_a_message_to_it(live: Live):
    from tests.support.watch import lines_with, wait_line, watch_pane

    oc, sid = opencode(live), registered(live, "a")
    oc.wait_idle(sid)
    name, token = live.names["a"], secrets.token_hex(4)
    env = {"HOME": str(live.root), "CROSSTALK_HOME": str(live.root / "xt"),
           "XDG_RUNTIME_DIR": str(live.root / "o" / "run")}  # fmt: skip
    with watch_pane(CROSSTALK, env, live.root, f"xw-{live.root.name}") as pane:
        row = wait_line(pane, name, "opencode", "yes")  # its agent: live, reachable
        assert str(oc.agent(sid).pid) in row, row
        traffic = ("@cli:tester (external)", name, "inform", "accepted")  # the traffic table's row (no text)
        before = lines_with(pane.screen(), *traffic)
        out = live.cli("send", name, f"watched {token}", "--json")
        assert json.loads(out.stdout)["state"] == "accepted", (out.stdout, out.stderr)
        wait_line(pane, *traffic, besides=before)
        pane.tmux("send-keys", "-t", pane.name, "q")
    oc.wait_seen(f"watched {token}")


def test_a_restarted_opencode_resumes_the_session_under_its_name(live: Live):
    """Last in the module: the shared OpenCode process is stopped and a new one started on the same state."""
    oc, sid, name = opencode(live), registered(live, "a"), live.names["a"]
    journal_before = oc.agent(sid).agent_id
    oc.close()
    live.oc = fresh = LiveOpenCode.start(live.root / "o", crosstalk_home=live.root / "xt")  # type: ignore[attr-defined]
    live.closers.append(fresh.close)
    fresh.say(sid, "back\nCALL crosstalk_list_agents {}")
    me = next(r for r in fresh.wait_tool_result("list_agents", "back")["agents"] if r.get("self"))
    assert me["name"] == name and fresh.agent(sid).agent_id == journal_before
    fresh.wait_idle(sid)
    token = secrets.token_hex(4)
    out = live.cli("send", name, f"after restart {token}", "--json")
    assert json.loads(out.stdout)["state"] == "accepted", (out.stdout, out.stderr)
    fresh.wait_seen(f"after restart {token}")
