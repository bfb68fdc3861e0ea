"""Claude → Gemini mid-turn through crosstalk, beside a bare hook handing the model the same text, in one run.

A real Gemini CLI 0.61.0 TUI in tmux with crosstalk installed (`crosstalk install gemini`), a second one with only a
bare AfterTool hook (bench/bare_gemini_hook.py: it hands over what waits in a file) and crosstalk's MCP server
without crosstalk's hooks (so both offer the model the same tools and run the same MCP child), and a real
`claude` 2.1.332,
each against its own mock model server. Each round the Gemini session runs a shell call (`sleep SLEEP_S`); while it
runs, the message is queued: by Claude's `send_message` (crosstalk) or by this process writing the file (bare). The
model reads it with that call's result (AfterTool). Latency on the mocks' clock: from the end of the shell call
(the mock sending the call, plus SLEEP_S) to the Gemini model request carrying the message, so both include the
same tool run and Gemini's own work, and differ by the hook: crosstalk's (python -m crosstalk.harness.gemini.hook,
the exchange with the shim's socket, the record) against the bare one. Rounds where Claude's send was answered only
after the shell call ended (it would wait for the next prompt) are dropped and counted.

    .venv/bin/python bench/gemini_delivery.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the live-session scaffolds: tests.support

from _common import exit_on_sigterm, ms, stats
from _live import against, arrival, call_sent, report, settle, wait_for
from tests.support.live_claude import LiveClaude
from tests.support.live_gemini import LiveGemini

TARGET = 1.5
SLEEP_S = 5.0
BARE = Path(__file__).resolve().with_name("bare_gemini_hook.py")


def idle(g: LiveGemini) -> None:
    """The turn ended: its AfterAgent hook ran (crosstalk's record says so), or for the bare session no model
    request for a moment."""
    if g.record() is not None:
        wait_for(lambda: (g.record() or {}).get("event") == "AfterAgent", "the Gemini turn never ended")
    else:
        settle(g)


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    rounds = 3 if ap.parse_args().quick else 10
    root = Path(tempfile.mkdtemp(prefix="xb", dir="/tmp"))
    run_dir = root / "grun"
    run_dir.mkdir(mode=0o700)
    queue = root / "bare.queue"
    g = b = c = None
    try:
        g = LiveGemini.start(root / "g", crosstalk_home=root / "xt", run_dir=run_dir)
        argv = " ".join(shlex.quote(str(x)) for x in (sys.executable, BARE, queue))
        hook = {"name": "bare", "type": "command", "command": argv}
        servers = json.loads((root / "g" / "home" / ".gemini" / "settings.json").read_text())["mcpServers"]
        b = LiveGemini.start(root / "b", crosstalk_home=root / "xb", run_dir=run_dir, install=False,
                             settings={"mcpServers": servers,
                                       "hooks": {"AfterTool": [{"matcher": ".*", "hooks": [hook]}]}})  # fmt: skip
        run_env = {"CROSSTALK_GEMINI_RUN_DIR": str(run_dir)}
        c = LiveClaude.start(root / "c", crosstalk_home=root / "xt", extra_env=run_env)
        g.say("CALL mcp_crosstalk_list_agents {}")
        g_name = next(r for r in g.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
        c.say("CALL mcp__crosstalk__list_agents {}")
        c.wait_tool_result("list_agents")
        settle(c)
        results: dict[str, list[float]] = {"crosstalk": [], "bare": []}
        dropped = 0

        def round_(way: str) -> float | None:
            s = g if way == "crosstalk" else b
            assert s is not None and c is not None
            idle(s)
            token = secrets.token_hex(5)
            s.mock.scripts_by[f"slow {token}"] = f'CALL run_shell_command {{"command": "sleep {SLEEP_S:g}"}}'
            calls, after = len(s.mock.function_calls), len(s.requests())
            s.say(f"slow {token}")
            t_call = wait_for(lambda: s.mock.function_calls[calls:] and s.mock.function_calls[calls]["at"], "shell")
            text = f"{way}-{token}"
            if way == "crosstalk":
                sent, n = len(c.mock.tool_calls), len(c.requests())
                c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': g_name, 'text': text})}")
                call_sent(c.mock, sent)
                c.wait_tool_result("send_message", after=n)
                if time.time() > t_call + SLEEP_S:  # answered after the call ended: it waits for the next prompt
                    s.say(f"flush {token}")
                    arrival(s, text, after)
                    settle(c)
                    return None
            else:
                queue.write_text(text)
            latency = arrival(s, text, after) - (t_call + SLEEP_S)
            if way == "crosstalk":
                settle(c)
            return latency

        for i in range(rounds + 1):
            for way in ("crosstalk", "bare"):
                latency = round_(way)
                if latency is None:
                    dropped += 1
                elif i:
                    results[way].append(latency)
        print(", ".join(f"after the tool {w} p50 {ms(stats(results[w])['p50'])}" for w in results), flush=True)
        figures = against("claude_to_gemini_mid_turn", results["crosstalk"], results["bare"], "bare AfterTool hook",
                          TARGET)  # fmt: skip
        report("gemini_delivery", figures, {"rounds": rounds, "dropped": dropped, "sleep_s": SLEEP_S})
    finally:
        for s in (c, b, g):
            if s is not None:
                s.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
