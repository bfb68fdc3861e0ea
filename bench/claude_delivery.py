"""Claude → Claude through crosstalk, beside Claude's own SendMessage between the same two live sessions, in one run.

Two real `claude` 2.1.332 sessions (headless stream-json, crosstalk installed with `crosstalk install claude`) of
one user (one Claude config dir, so Claude's own SendMessage reaches the other), each against its own mock
Anthropic server (crosstalk.demo.models). Latency is measured on the mocks' clock: from A's
tool call leaving A's mock (send_message, or Claude's own SendMessage) to B's next model request that carries the
message arriving at B's mock. Rounds alternate the two paths, for an idle receiver and for a busy one (B in a
1.5 s Bash tool call when the message is sent: both paths then wait for the same tool boundary).

Then `crosstalk send NAME` (the CLI, a fresh process) → B's model request, beside a raw line written to B's own
socket by this process (Claude's wire as its own SendMessage writes it, no crosstalk): from just before the send
to the request at B's mock, 60 pairs in a full run (12 quick), the two interleaved.

    .venv/bin/python bench/claude_delivery.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the live-session scaffolds: tests.support

from _common import exit_on_sigterm, ms, stats, versus
from _live import against, arrival, call_sent, report, settle, wait_for
from tests.support.live_claude import CROSSTALK, LiveClaude

TARGET = 1.5
CLI_ROUNDS = 60  # shell -> Claude pairs in a full run (a quick run: a fifth)
# Claude admits a sender's messages through a token bucket (30, refilled at 0.5/s; 2.1.332's defaults): crosstalk's
# frames into B all come from B's shim, so past the bucket the pairs are spaced to its refill, or B drops them.
PAIR_S = 2.1


def one(a: LiveClaude, b: LiveClaude, call: str, args: dict, token: str, busy: bool) -> float:
    if busy:
        calls = len(b.mock.tool_calls)
        b.say('CALL Bash {"command": "sleep 1.5", "description": "busy"}')
        wait_for(lambda: len(b.mock.tool_calls) > calls, "B's Bash call")
        time.sleep(0.3)
    after, calls = len(b.requests()), len(a.mock.tool_calls)
    a.say(f"CALL {call} {json.dumps(args)}")
    sent = call_sent(a.mock, calls)
    latency = arrival(b, token, after) - sent
    settle(a)
    settle(b)
    return latency


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    rounds = 5 if ap.parse_args().quick else 25
    root = Path(tempfile.mkdtemp(prefix="xb", dir="/tmp"))
    a = b = None
    try:
        a = LiveClaude.start(root / "alpha", crosstalk_home=root / "xt", config_dir=root / "claude")
        b = LiveClaude.start(root / "beta", crosstalk_home=root / "xt", config_dir=root / "claude")
        for s in (a, b):
            s.say("CALL mcp__crosstalk__list_agents {}")
            s.wait_tool_result("list_agents")
            settle(s)
        b_agent, b_native = b.agent().name, (b.record() or {})["name"]
        print(f"sessions: A {a.agent().name}, B {b_agent} (Claude name {b_native})", flush=True)
        results: dict[str, list[float]] = {}
        for busy in (False, True):
            case = "busy" if busy else "idle"
            for i in range(rounds + 1):  # the first round of each path warms up
                t = secrets.token_hex(5)
                native = {"to": b_native, "message": f"n-{t}", "summary": "bench"}
                nat = one(a, b, "SendMessage", native, f"n-{t}", busy)
                t = secrets.token_hex(5)
                xt = one(a, b, "mcp__crosstalk__send_message", {"to": b_agent, "text": f"x-{t}"}, f"x-{t}", busy)
                if i:
                    results.setdefault(f"native_{case}", []).append(nat)
                    results.setdefault(f"crosstalk_{case}", []).append(xt)
            print(f"{case}: native p50 {ms(stats(results[f'native_{case}'])['p50'])}, "
                  f"crosstalk p50 {ms(stats(results[f'crosstalk_{case}'])['p50'])}", flush=True)  # fmt: skip
        cli_env = {"PATH": b.env["PATH"], "HOME": b.env["HOME"], "CROSSTALK_HOME": b.env["CROSSTALK_HOME"]}
        record = b.record() or {}
        # More rounds than the model paths: both sides are short and Claude's own handling swings by ~10 ms from one
        # message to the next, so 25 pairs leave the ratio of two medians to luck (1.36x-1.67x in three runs).
        for i in range(CLI_ROUNDS * rounds // 25 + 1):
            paced = time.monotonic() + PAIR_S
            t = secrets.token_hex(5)
            after, t0 = len(b.requests()), time.time()
            subprocess.run([str(CROSSTALK), "send", b_agent, f"c-{t}"], env=cli_env, check=True, timeout=60,
                           capture_output=True)  # fmt: skip
            cli = arrival(b, f"c-{t}", after) - t0
            settle(b)
            t = secrets.token_hex(5)
            after, t0 = len(b.requests()), time.time()
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(record["messagingSocketPath"])
                # As Claude's own SendMessage writes it (a bare line would be held by a bypass-mode session).
                envelope = f'<cross-session-message from="uds:/nowhere" from-name="bench" from-mode="bypass">\nr-{t}\n'
                line = {
                    "type": "user",
                    "message": {"role": "user", "content": envelope + "</cross-session-message>"},
                    "priority": "next",
                }
                sock.sendall((json.dumps(line) + "\n").encode())
                sock.shutdown(socket.SHUT_WR)
                sock.recv(1)
            raw = arrival(b, f"r-{t}", after) - t0
            settle(b)
            time.sleep(max(0.0, paced - time.monotonic()))
            if i:
                results.setdefault("cli", []).append(cli)
                results.setdefault("raw", []).append(raw)
        figures = [
            f
            for case in ("idle", "busy")
            for f in against(
                f"claude_to_claude_{case}",
                results[f"crosstalk_{case}"],
                results[f"native_{case}"],
                "Claude SendMessage",
                TARGET,
            )
        ]
        c, r = stats(results["cli"]), stats(results["raw"])
        figures.append(versus("crosstalk_send_to_claude_p50", c["p50"], r["p50"], "ms", "raw socket line p50"))
        report("claude_delivery", figures, {"rounds": rounds, "cli_rounds": len(results["cli"])})
    finally:
        for s in (b, a):
            if s is not None:
                s.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
