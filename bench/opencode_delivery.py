"""Claude → OpenCode and shell → OpenCode through crosstalk, beside OpenCode's own `prompt_async` of the same kind
of text into the same idle session, in one run.

A real OpenCode 1.18.33 (`opencode serve`, crosstalk installed with `crosstalk install opencode`) and a real `claude`
2.1.332, each against its own mock model server. Latency on the mocks' clock, to the OpenCode model request carrying
the message:

- Claude → OpenCode: from the Claude mock sending the `send_message` tool call (Claude's MCP client, the sending
  shim, the task frame, the receiving shim's chain and journal, the plugin's inbox, `client.session.promptAsync` and
  the wait for OpenCode's `chat.message`, the answer back).
- bare tool: Claude calls `opencode_prompt` of bench/bare_deliver.py, a bare MCP server in the same Claude session
  that posts OpenCode's own `prompt_async` (the route the plugin's `client.session.promptAsync` calls): the same
  tool call, nothing of crosstalk's in between.
- shell → OpenCode: `crosstalk send NAME TEXT` (a fresh process: its start-up dominates, shown, not targeted) and
  the same send from this process over the agent's socket.
- raw: this process posts `prompt_async` itself: OpenCode's own path with nothing of crosstalk's.

    .venv/bin/python bench/opencode_delivery.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the live-session scaffolds: tests.support

from _common import exit_on_sigterm, ms, stats, versus
from _live import against, arrival, call_sent, report, settle
from tests.support.live_claude import CROSSTALK, LiveClaude
from tests.support.live_opencode import LiveOpenCode

TARGET = 1.5
BARE = Path(__file__).resolve().with_name("bare_deliver.py")


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    rounds = 5 if ap.parse_args().quick else 20
    root = Path(tempfile.mkdtemp(prefix="xb", dir="/tmp"))
    oc = c = None
    try:
        oc = LiveOpenCode.start(root / "o", crosstalk_home=root / "xt")
        bare = {"type": "stdio", "command": sys.executable, "args": [str(BARE)], "env": {}}
        c = LiveClaude.start(root / "c", crosstalk_home=root / "xt", mcp_servers={"bare": bare})
        sid = oc.new_session()
        oc.say(sid, "bench\nCALL crosstalk_list_agents {}")
        name = next(r for r in oc.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
        c.say("CALL mcp__crosstalk__list_agents {}")
        c.wait_tool_result("list_agents")
        oc.wait_idle(sid)
        settle(oc)
        settle(c)
        from crosstalk.core.message import new_message
        from crosstalk.ingress.client import send
        from crosstalk.registry.paths import StatePaths

        paths = StatePaths(root / "xt")
        url = f"http://127.0.0.1:{oc.port}"
        cli_env = {"PATH": oc.env["PATH"], "HOME": str(root), "CROSSTALK_HOME": str(root / "xt")}
        results: dict[str, list[float]] = {}

        def into_opencode(way: str, text: str) -> float:
            after, t0 = len(oc.requests()), time.time()
            if way == "claude":
                calls = len(c.mock.tool_calls)
                c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': name, 'text': text})}")
                t0 = call_sent(c.mock, calls)
            elif way == "bare":
                calls = len(c.mock.tool_calls)
                c.say(f"CALL mcp__bare__opencode_prompt {json.dumps({'url': url, 'session': sid, 'text': text})}")
                t0 = call_sent(c.mock, calls)
            elif way == "cli":
                subprocess.run([str(CROSSTALK), "send", name, text], env=cli_env, check=True, timeout=60,
                               capture_output=True)  # fmt: skip
            elif way == "socket":
                send(paths, new_message(name, text, from_="@bench:opencode"))
            else:
                oc.say(sid, text)
            latency = arrival(oc, text, after) - t0
            oc.wait_idle(sid)
            settle(oc)
            if way in ("claude", "bare"):
                settle(c)
            return latency

        for i in range(rounds + 1):
            for way in ("claude", "bare", "cli", "socket", "raw"):
                latency = into_opencode(way, f"{way}-{secrets.token_hex(5)}")
                if i:
                    results.setdefault(way, []).append(latency)
        print(", ".join(f"into opencode {w} p50 {ms(stats(results[w])['p50'])}" for w in results), flush=True)
        figures = [
            *against("claude_to_opencode_vs_bare_tool", results["claude"], results["bare"], "bare tool", TARGET),
            *against("claude_to_opencode", results["claude"], results["raw"], "raw prompt_async", TARGET),
            *against("socket_to_opencode", results["socket"], results["raw"], "raw prompt_async", TARGET),
            *(
                versus(f"cli_to_opencode_{p}", stats(results["cli"])[p], stats(results["raw"])[p], "ms", f"raw {p}")
                for p in ("p50", "p99")
            ),
        ]
        report("opencode_delivery", figures, {"rounds": rounds})
    finally:
        for s in (c, oc):
            if s is not None:
                s.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
