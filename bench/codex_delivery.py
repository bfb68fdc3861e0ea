"""Claude → Codex and Codex → Claude through crosstalk, beside a bare client's `turn/start` into the same Codex
thread, in one run.

A live `claude` 2.1.332 session and the real `codex app-server` 0.171.0 on its control socket (crosstalk set up
with `crosstalk install claude` and `crosstalk install codex`), each against its own mock model server. Latency on
the mocks' clock: from the sender's tool call leaving its mock (Claude's send_message, Codex's send_message) to the
receiver's next model request carrying the message. The baseline is this process writing `turn/start` into the
same Codex thread over its own connection to the control socket: from just before the write to Codex's model
request. Rounds alternate; "mid-turn" means the Codex thread is inside a slow (2 s) model answer when the message
is sent (crosstalk's auto delivery and the bare turn/start both join that turn).

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))  # the live-session scaffolds

from live_claude import LiveClaude
from live_codex import LiveCodex

from _common import exit_on_sigterm, ms, stats, versus
from _live import against, arrival, call_sent, report, settle, wait_for

TARGET = 1.5


def busy(cx: LiveCodex, thread: str) -> None:
    cx.say(thread, "SLEEP 2\na slow turn")
    wait_for(lambda: cx.request("thread/read", {"threadId": thread})["thread"]["status"]["type"] == "active", "busy")
    time.sleep(0.3)


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    rounds = 5 if ap.parse_args().quick else 25
    root = Path(tempfile.mkdtemp(prefix="xb", dir="/tmp"))
    a = cx = None
    try:
        a = LiveClaude.start(root / "alpha", crosstalk_home=root / "xt")
        cx = LiveCodex.start(root / "cx", crosstalk_home=root / "xt")
        a.say("CALL mcp__crosstalk__list_agents {}")
        claude_name = a.wait_tool_result("list_agents")["agents"][0]["name"]
        thread = cx.start_thread()
        cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
        codex_name = next(r for r in cx.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
        settle(a)
        settle(cx)
        print(f"Claude {claude_name}, Codex thread {codex_name}", flush=True)
        results: dict[str, list[float]] = {}
        for case in ("idle", "midturn"):
            for i in range(rounds + 1):
                if case == "midturn":
                    busy(cx, thread)
                t = secrets.token_hex(5)
                after, calls = len(cx.requests()), len(a.mock.tool_calls)
                a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': codex_name, 'text': f'x-{t}'})}")
                sent = call_sent(a.mock, calls)
                xt = arrival(cx, f"x-{t}", after) - sent
                settle(a)
                settle(cx)
                if case == "midturn":
                    busy(cx, thread)
                t = secrets.token_hex(5)
                after, t0 = len(cx.requests()), time.time()
                cx.say(thread, f"b-{t}")
                bare = arrival(cx, f"b-{t}", after) - t0
                settle(cx)
                if i:
                    results.setdefault(f"claude_to_codex_{case}", []).append(xt)
                    results.setdefault(f"bare_{case}", []).append(bare)
            print(f"{case}: crosstalk p50 {ms(stats(results[f'claude_to_codex_{case}'])['p50'])}, "
                  f"bare turn/start p50 {ms(stats(results[f'bare_{case}'])['p50'])}", flush=True)  # fmt: skip
        for i in range(rounds + 1):  # Codex → Claude (Claude idle)
            t = secrets.token_hex(5)
            after, calls = len(a.requests()), len(cx.mock.tool_calls)
            cx.say(thread, f"CALL mcp__crosstalk.send_message {json.dumps({'to': claude_name, 'text': f'c-{t}'})}")
            sent = call_sent(cx.mock, calls)
            lat = arrival(a, f"c-{t}", after) - sent
            settle(a)
            settle(cx)
            if i:
                results.setdefault("codex_to_claude", []).append(lat)
        figures = [
            f
            for case in ("idle", "midturn")
            for f in against(
                f"claude_to_codex_{case}",
                results[f"claude_to_codex_{case}"],
                results[f"bare_{case}"],
                "bare turn/start",
                TARGET,
            )
        ]
        c, b = stats(results["codex_to_claude"]), stats(results["bare_idle"])
        figures.append(versus("codex_to_claude_p50", c["p50"], b["p50"], "ms", "bare turn/start p50 (into Codex)"))
        report("codex_delivery", figures, {"rounds": rounds})
    finally:
        for s in (cx, a):
            if s is not None:
                s.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
