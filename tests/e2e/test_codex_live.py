"""Codex for real: the pinned `codex app-server` on its control socket, crosstalk set up with `crosstalk install
codex`, a mock Responses server logging every request; a Claude session messages a Codex thread by name."""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_claude import require_claude, sessions
from live_codex import LiveCodex, require_codex

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture
def root() -> Iterator[Path]:
    require_claude()
    require_codex()
    path = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


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
        a.say(f'CALL mcp__crosstalk__send_message {json.dumps({"to": me["name"], "text": f"to codex {token}"})}')
        sent = a.wait_tool_result("send_message")
        assert sent["state"] == "accepted", sent
        seen = cx.wait_seen(f"to codex {token}", after=n)
        assert "cross-session-message" in seen.raw
