"""`crosstalk capture` of a real Codex thread's agent: the real `codex app-server` (pinned) with `crosstalk mcp` as
its MCP server, against the mock model. One capture holds the MCP frames Codex sends, the socket lines of a
`crosstalk send`, and the app-server calls that deliver it, with no key or token in it."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.capture import capture_dir_is_empty, finish, read_capture, secrets_of, start_capture, stop
from tests.support.live_claude import CROSSTALK
from tests.support.live_codex import LiveCodex

pytestmark = pytest.mark.timeout(240)


def test_a_codex_thread_captured_while_a_shell_sends_to_it(live_root: Path, require: Callable[[str], Path]):
    require("codex")
    home = live_root / "xt"
    with LiveCodex.start(live_root / "cx", crosstalk_home=home) as cx:
        thread = cx.start_thread()
        cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
        [me] = [r for r in cx.wait_tool_result("list_agents")["agents"] if r.get("self")]
        name, agent_id = me["name"], me["agent_id"]
        env = {"PATH": cx.env["PATH"], "HOME": cx.env["HOME"], "CROSSTALK_HOME": str(home)}
        out = live_root / "codex.capture.jsonl"
        cap = start_capture([str(CROSSTALK), "capture", name, "--for", "600", "-o", str(out)], env, live_root)
        try:
            token = secrets.token_hex(6)
            sent = subprocess.run([str(CROSSTALK), "send", name, f"ci says {token}", "--from", "@ci:build"],
                                  env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
            assert sent.returncode == 0 and sent.stdout.startswith("queued"), sent.stdout + sent.stderr
            n = len(cx.requests())
            cx.say(thread, "CALL mcp__crosstalk.receive_message {}")  # another tool: its result is this turn's
            assert cx.wait_tool_result("receive_message", after=n)["state"] == "ok"
            cap.send_signal(signal.SIGINT)
            code, _, stderr = finish(cap)
            assert code == 0, stderr
        finally:
            stop(cap)
        header, records = read_capture(out)
        assert header["harness"] == "codex" and header["agent"]["name"] == name
        assert set(header["channels"]) == {"mcp", "socket", "app-server"}, header
        calls = [r["frame"] for r in records if r["channel"] == "mcp" and r["direction"] == "in"]
        assert any(c.get("method") == "tools/call" and c["params"]["name"] == "receive_message" for c in calls)
        assert any(c["params"]["_meta"].get("threadId") == thread for c in calls if c.get("method") == "tools/call")
        user = [r["frame"] for r in records if r["channel"] == "socket" and r["frame"].get("type") == "user"]
        assert [u["message"]["content"] for u in user] == [f"ci says {token}"]
        app = [r["frame"] for r in records if r["channel"] == "app-server"]
        injected = [f for f in app if f.get("method") == "thread/inject_items"]
        assert injected and injected[0]["params"]["threadId"] == thread
        assert token in json.dumps(injected[0])  # the message, as delivered into the thread
        text = out.read_text()
        for secret in secrets_of(home, agent_id):
            assert secret not in text
        assert capture_dir_is_empty(home)
