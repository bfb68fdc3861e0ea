"""Claude Code for real: the pinned `claude` runs as live sessions with crosstalk installed the README way, against
mock Anthropic servers that log every request, and each test asserts on what a session's model saw."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_claude import LiveClaude, bin_dir, sessions

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture
def root() -> Iterator[Path]:
    from conftest import harness_binary, make_tmp  # the e2e conftest: skip, or fail when the CLIs are required

    harness_binary("claude")
    path = make_tmp()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def register(s: LiveClaude) -> str:
    """The session calls list_agents once: its agent exists from then on. Returns its name."""
    n = len(s.requests())
    s.say("CALL mcp__crosstalk__list_agents {}")
    s.wait_tool_result("list_agents")
    assert len(s.requests()) > n
    return s.agent().name


def test_a_message_by_name_lands_in_an_idle_session(root: Path):
    with sessions(root, "alpha", "beta") as live:
        a, b = live["alpha"], live["beta"]
        b_name = register(b)
        token = secrets.token_hex(6)
        before = len(b.requests())
        a.say(f'CALL mcp__crosstalk__send_message {json.dumps({"to": b_name, "text": f"hello beta {token}"})}')
        result = a.wait_tool_result("send_message")
        assert result["state"] == "accepted", result
        seen = b.wait_seen(f"hello beta {token}", after=before)
        newest = json.dumps(seen.body["messages"][-1])
        a_name = a.agent().name
        assert f'from-name=\\"{a_name}\\"' in newest and "cross-session-message" in newest
        assert f'message-id=\\"{result["message_id"]}\\"' in newest
