"""Live sessions on two "machines" (two state roots, each joined to one real nats-server on loopback with its own
credentials, each with its `crosstalk relay serve`): a live Claude Code session on machine a sends to a Codex thread
on machine b by `NAME@b` through its own send_message tool, and the Codex session answers with its own reply tool,
back across the relay into the Claude session; then Claude asks a pi session on b with its ask tool, and pi's reply
tool answers it. The real pinned harness CLIs against mock model servers.

A relayed sender is an external one on the receiving machine (`@relay:a/<name>`), and Codex appends a message from a
sender it cannot verify to the thread without starting a turn (harness/codex/adapter.py): the message is `queued`,
and the thread's next turn sees it, as a `crosstalk send --from @ci:...` from a shell is."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.live_claude import LiveClaude
from tests.support.live_codex import LiveCodex
from tests.support.live_pi import LivePi
from tests.support.nats_relay import NatsServer, join_and_serve, nats_server
from tests.support.procs import Procs

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def root(live_root: Path, require: Callable[[str], Path]) -> Path:
    require("claude")
    require("codex")
    require("pi")
    return live_root


@contextlib.contextmanager
def machine(home: Path, relay: NatsServer, alias: str) -> Iterator[Procs]:
    """A state root joined to `relay` as `alias`, its relay process serving (stopped at the end)."""
    home.mkdir(mode=0o700)
    m = Procs(home)
    try:
        join_and_serve(m, relay, alias)
        yield m
    finally:
        m.close()


def register(cx: LiveCodex, thread: str) -> str:
    n = len(cx.requests())
    cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
    listed = cx.wait_tool_result("list_agents", after=n)
    [me] = [r for r in listed["agents"] if r.get("self")]
    return str(me["name"])


def test_claude_on_a_to_codex_on_b_and_codex_replies_back_by_tool(root: Path) -> None:
    with (
        nats_server("a", "b") as relay,
        machine(root / "xa", relay, "a"),
        machine(root / "xb", relay, "b"),
        LiveClaude.start(root / "alpha", crosstalk_home=root / "xa", config_dir=root / "claude") as claude,
        LiveCodex.start(root / "cx", crosstalk_home=root / "xb") as cx,
        LivePi.start(root / "p", crosstalk_home=root / "xb", PI_CROSSTALK_HANDLE="pi-b") as pi,
    ):
        thread = cx.start_thread()
        codex_name = register(cx, thread)
        cx.wait_status(thread, "idle")
        claude.say("CALL mcp__crosstalk__list_agents {}")
        [me] = [r for r in claude.wait_tool_result("list_agents")["agents"] if r.get("self")]
        claude_name = me["name"]
        token = secrets.token_hex(6)

        # a → b: Claude's own tool, NAME@b; the Codex thread holds it for its next turn (an external sender).
        n = len(cx.requests())
        claude.say(
            "CALL mcp__crosstalk__send_message "
            + json.dumps({"to": f"{codex_name}@b", "text": f"hello from machine a {token}"})
        )
        sent = claude.wait_tool_result("send_message")
        assert sent["state"] == "queued" and sent["to"] == f"{codex_name}@b" and sent["via"] == "relay", sent
        mid = sent["message_id"]
        assert cx.status(thread) == "idle"

        # b → a: the Codex session's next turn sees it, and answers with its own reply tool.
        reply = {"message_id": mid, "text": f"hello back from machine b {token}"}
        cx.say(thread, f"CALL mcp__crosstalk.reply {json.dumps(reply)}")
        seen = cx.wait_seen(f"hello from machine a {token}", after=n)
        assert "@relay:a/" + claude_name in seen.raw  # who sent it, as machine b names it
        replied = cx.wait_tool_result("reply", after=n)
        assert replied["state"] == "replied" and replied["forwarded"]["to"] == f"{claude_name}@a", replied
        assert replied["forwarded"]["state"] in ("accepted", "delivered"), replied
        back = claude.wait_seen(f"hello back from machine b {token}")
        raw = json.dumps(back.body["messages"][-1])
        assert f'in-reply-to=\\"{mid}\\"' in raw and f"@relay:b/{codex_name}" in raw, raw

        # An ask from a to pi on b, through Claude's ask tool; pi's session answers with its reply tool, and the
        # answer reaches the asking session and its receive_message(state="replies").
        n = len(claude.requests())
        ask = {"to": "pi-b@b", "text": f"which branch on b? {token}", "deadline_seconds": 120}
        claude.say(f"CALL mcp__crosstalk__ask {json.dumps(ask)}")
        asked = claude.wait_tool_result("ask", after=n)
        assert asked["state"] == "accepted" and asked["via"] == "relay", asked
        ask_id = asked["message_id"]
        seen = pi.wait_seen(f"which branch on b? {token}")
        # An ask at pi, as a local one: tagged as an ask with its id, so pi's reply tool answers it.
        assert f"[ask from @relay:a/{claude_name} · id {ask_id}] which branch on b? {token}" in seen.raw, seen.raw
        pi.idle()
        pi.say(f"CALL reply {json.dumps({'message_id': ask_id, 'text': f'main, on b {token}'})}")
        back = claude.wait_seen(f"main, on b {token}", after=n)
        assert ask_id in json.dumps(back.body["messages"][-1])  # in-reply-to: the ask
        m = len(claude.requests())
        claude.say('CALL mcp__crosstalk__receive_message {"state": "replies"}')
        replies = claude.wait_tool_result("receive_message", after=m)
        assert [(e["in_reply_to"], e["text"]) for e in replies["entries"]][-1:] == [(ask_id, f"main, on b {token}")]
