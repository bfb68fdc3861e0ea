"""Claude → Codex and Codex → Claude through crosstalk, beside bare deliveries into the same sessions, in one run.

A live `claude` 2.1.332 session and the real `codex app-server` 0.171.0 on its control socket (crosstalk set up
with `crosstalk install claude` and `crosstalk install codex`), each against its own mock model server. Latency on
the mocks' clock: from the sender's tool call leaving its mock to the receiver's next model request carrying the
message. Rounds interleave three ways of putting a message into the Codex thread:

- crosstalk: Claude's `send_message` (shim → A2A → the thread's agent → `turn/start`);
- bare tool: Claude calls `turn_start` of bench/bare_deliver.py, a bare MCP server in the same session that writes
  `turn/start` over its own kept connection: the same tool call as crosstalk's, nothing between Claude and Codex;
- bare turn/start: this process writes `turn/start` over its own connection (from just before the write), with no
  sending harness at all.

"Mid-turn": the thread is inside a slow (2 s) model answer when the message is sent (all three join that turn).
Codex → Claude: Codex's `send_message`, beside Codex calling bare_deliver.py's `claude_line` (one line into Claude's
messaging socket, as Claude's own SendMessage writes it).

    .venv/bin/python bench/codex_delivery.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the live-session scaffolds: tests.support

from _common import exit_on_sigterm, ms, stats
from _live import against, arrival, call_sent, report, settle, wait_for
from tests.support.live_claude import LiveClaude
from tests.support.live_codex import LiveCodex

TARGET = 1.5
BARE = [sys.executable, str(Path(__file__).resolve().with_name("bare_deliver.py"))]


def busy(cx: LiveCodex, thread: str) -> None:
    cx.say(thread, "SLEEP 2\na slow turn")
    wait_for(lambda: cx.request("thread/read", {"threadId": thread})["thread"]["status"]["type"] == "active", "busy")
    time.sleep(0.3)


def by_tool(say: Callable[[str], None], mock: Any, receiver: LiveClaude | LiveCodex, call: str, token: str) -> float:
    """The sender's model (`say` prompts it, `mock` serves it) calls a tool (`call`: the mock's CALL line): from
    that call leaving the mock to the receiver's model request carrying `token`."""
    after, calls = len(receiver.requests()), len(mock.tool_calls)
    say(call)
    sent = call_sent(mock, calls)
    return arrival(receiver, token, after) - sent


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    rounds = 5 if ap.parse_args().quick else 25
    root = Path(tempfile.mkdtemp(prefix="xb", dir="/tmp"))
    a = cx = None
    try:
        bare_toml = f"[mcp_servers.bare]\ncommand = {json.dumps(BARE[0])}\nargs = [{json.dumps(BARE[1])}]\n"
        cx = LiveCodex.start(root / "cx", crosstalk_home=root / "xt", config=bare_toml)
        bare = {"type": "stdio", "command": BARE[0], "args": BARE[1:], "env": {}}
        a = LiveClaude.start(root / "alpha", crosstalk_home=root / "xt", mcp_servers={"bare": bare})
        a.say("CALL mcp__crosstalk__list_agents {}")
        claude_name = a.wait_tool_result("list_agents")["agents"][0]["name"]
        thread = cx.start_thread()
        cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
        codex_name = next(r for r in cx.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
        claude_socket = (a.record() or {})["messagingSocketPath"]
        settle(a)
        settle(cx)
        print(f"Claude {claude_name}, Codex thread {codex_name}", flush=True)
        results: dict[str, list[float]] = {}

        def in_codex(text: str) -> None:
            cx.say(thread, text)

        def xt(t: str) -> float:
            call = f"CALL mcp__crosstalk__send_message {json.dumps({'to': codex_name, 'text': t})}"
            return by_tool(a.say, a.mock, cx, call, t)

        def tool(t: str) -> float:
            args = {"socket": str(cx.socket), "thread": thread, "text": t}
            return by_tool(a.say, a.mock, cx, f"CALL mcp__bare__turn_start {json.dumps(args)}", t)

        def direct(t: str) -> float:
            after, t0 = len(cx.requests()), time.time()
            cx.say(thread, t)
            return arrival(cx, t, after) - t0

        ways: dict[str, Callable[[str], float]] = {"crosstalk": xt, "bare_tool": tool, "bare_turn_start": direct}
        for case in ("idle", "midturn"):
            for i in range(rounds + 1):
                for way, deliver in ways.items():
                    if case == "midturn":
                        busy(cx, thread)
                    latency = deliver(f"{way[:2]}-{secrets.token_hex(5)}")
                    settle(a)
                    settle(cx)
                    if i:  # the first round warms every path up
                        results.setdefault(f"{way}_{case}", []).append(latency)
            print(f"{case}: " + ", ".join(f"{w} p50 {ms(stats(results[f'{w}_{case}'])['p50'])}" for w in ways),
                  flush=True)  # fmt: skip
        for i in range(rounds + 1):  # Codex → Claude (Claude idle)
            for way in ("crosstalk", "bare_tool"):
                t = f"{way[:2]}-{secrets.token_hex(5)}"
                if way == "crosstalk":
                    call = f"CALL mcp__crosstalk.send_message {json.dumps({'to': claude_name, 'text': t})}"
                else:
                    call = f"CALL mcp__bare.claude_line {json.dumps({'socket': claude_socket, 'text': t})}"
                latency = by_tool(in_codex, cx.mock, a, call, t)
                settle(a)
                settle(cx)
                if i:
                    results.setdefault(f"codex_to_claude_{way}", []).append(latency)
        figures = []
        for case in ("idle", "midturn"):
            ours = results[f"crosstalk_{case}"]
            figures += against(f"claude_to_codex_{case}", ours, results[f"bare_tool_{case}"], "bare tool", TARGET)
            figures += against(
                f"claude_to_codex_{case}_vs_process", ours, results[f"bare_turn_start_{case}"], "bare turn/start",
                TARGET,
            )  # fmt: skip
        figures += against(
            "codex_to_claude", results["codex_to_claude_crosstalk"], results["codex_to_claude_bare_tool"],
            "bare claude_line tool", TARGET,
        )  # fmt: skip
        report("codex_delivery", figures, {"rounds": rounds})
    finally:
        for s in (cx, a):
            if s is not None:
                s.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
