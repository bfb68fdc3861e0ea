"""CLI → pi and pi → Claude through crosstalk, beside bare deliveries into the same sessions, in one run; then the
back-to-back check: three messages into an idle pi session, 100 times, none lost or reordered.

A real pi 0.73.1 (RPC mode, the crosstalk extension installed with `crosstalk install pi`) and a real `claude`
2.1.332, each against its own mock model server. Latency on the mocks' clock, from just before the send to the
receiver's model request carrying the message:

- CLI → pi: `crosstalk send NAME TEXT` (a fresh process: start-up, socket, chain, the link, the extension's queue)
  and the same send from this process over the agent's socket (crosstalk without the CLI's start-up), beside
  bench/pi/bare_inbox.ts, a bare extension loaded into the same pi session, whose socket line becomes
  `pi.sendUserMessage(line)`: the least an extension does.
- pi → Claude: pi's `/crosstalk send NAME TEXT` (from the RPC prompt being accepted) beside a raw line written to
  Claude's messaging socket by this process (Claude's own wire, no crosstalk).

    .venv/bin/python bench/pi_delivery.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
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

from _common import exit_on_sigterm, figure, ms, stats, versus
from _live import against, arrival, report, settle, wait_for
from tests.support.live_claude import CROSSTALK, LiveClaude
from tests.support.live_pi import LivePi

TARGET = 1.5
BARE_EXT = Path(__file__).resolve().parent / "pi" / "bare_inbox.ts"


def line_to(path: str, line: str) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall((line + "\n").encode())
        sock.recv(16)


def claude_line(path: str, text: str) -> None:
    """As Claude's own SendMessage writes it (see bench/claude_delivery.py)."""
    envelope = f'<cross-session-message from="uds:/nowhere" from-name="bench" from-mode="bypass">\n{text}\n'
    line = {"type": "user", "message": {"role": "user", "content": envelope + "</cross-session-message>"},
            "priority": "next"}  # fmt: skip
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall((json.dumps(line) + "\n").encode())
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)


def back_to_back(pi: LivePi, root: Path, name: str, reps: int) -> dict[str, int]:
    """`reps` times: three sends, each right after the previous one's answer, into the idle session; then check
    the model saw all three, once each, in order."""
    from crosstalk.core.message import new_message
    from crosstalk.ingress.client import send
    from crosstalk.registry.paths import StatePaths

    paths = StatePaths(root / "xt")
    lost = reordered = 0
    for rep in range(reps):
        token = secrets.token_hex(4)
        needles = [f"r{rep}m{i}-{token}" for i in range(3)]
        for n in needles:
            send(paths, new_message(name, n, from_="@bench:b2b"))
        deadline = time.monotonic() + 30
        while not all(any(n in r.raw for r in pi.requests()) for n in needles) and time.monotonic() < deadline:
            time.sleep(0.01)
        pi.idle(quiet_s=0.15)
        texts = pi.user_texts(pi.requests()[-1])
        found = [next((i for i, t in enumerate(texts) if n in t), -1) for n in needles]
        lost += found.count(-1)
        seen = [f for f in found if f >= 0]
        reordered += int(seen != sorted(seen))
        if sum(n in t for t in texts for n in needles) != len(seen):
            reordered += 1  # one arrived twice
    return {"reps": reps, "messages": 3 * reps, "lost": lost, "reordered": reordered}


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    quick = ap.parse_args().quick
    rounds, reps = (5, 10) if quick else (25, 100)
    root = Path(tempfile.mkdtemp(prefix="xb", dir="/tmp"))
    pi = a = None
    try:
        bare_sock = str(root / "bare.sock")
        pi = LivePi.start(root / "p", crosstalk_home=root / "xt", args=("-e", str(BARE_EXT)),
                          PI_CROSSTALK_HANDLE="bench-pi", BARE_INBOX_SOCK=bare_sock)  # fmt: skip
        a = LiveClaude.start(root / "alpha", crosstalk_home=root / "xt")
        a.say("CALL mcp__crosstalk__list_agents {}")
        claude_name = next(r for r in a.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
        claude_socket = (a.record() or {})["messagingSocketPath"]
        wait_for(lambda: os.path.exists(bare_sock), "the bare extension's socket")
        settle(a)
        pi.idle()
        cli_env = {"PATH": pi.env["PATH"], "HOME": pi.env["HOME"], "CROSSTALK_HOME": pi.env["CROSSTALK_HOME"]}
        from crosstalk.core.message import new_message
        from crosstalk.ingress.client import send
        from crosstalk.registry.paths import StatePaths

        paths = StatePaths(root / "xt")
        results: dict[str, list[float]] = {}

        def into_pi(way: str, text: str) -> float:
            after, t0 = len(pi.requests()), time.time()
            if way == "cli":
                subprocess.run([str(CROSSTALK), "send", "bench-pi", text], env=cli_env, check=True, timeout=60,
                               capture_output=True)  # fmt: skip
            elif way == "socket":
                send(paths, new_message("bench-pi", text, from_="@bench:pi"))
            else:
                line_to(bare_sock, text)
            latency = arrival(pi, text, after) - t0
            pi.idle(quiet_s=0.15)
            return latency

        for i in range(rounds + 1):
            for way in ("cli", "socket", "bare"):
                latency = into_pi(way, f"{way}-{secrets.token_hex(5)}")
                if i:
                    results.setdefault(way, []).append(latency)
        print(", ".join(f"into pi {w} p50 {ms(stats(results[w])['p50'])}" for w in ("cli", "socket", "bare")),
              flush=True)  # fmt: skip
        for i in range(rounds + 1):
            t = f"pc-{secrets.token_hex(5)}"
            after, t0 = len(a.requests()), time.time()
            pi.say(f"/crosstalk send {claude_name} {t}")
            xt = arrival(a, t, after) - t0
            settle(a)
            t = f"raw-{secrets.token_hex(5)}"
            after, t0 = len(a.requests()), time.time()
            claude_line(claude_socket, t)
            raw = arrival(a, t, after) - t0
            settle(a)
            if i:
                results.setdefault("pi_to_claude", []).append(xt)
                results.setdefault("raw_to_claude", []).append(raw)
        print(f"pi to claude p50 {ms(stats(results['pi_to_claude'])['p50'])}, "
              f"raw line p50 {ms(stats(results['raw_to_claude'])['p50'])}", flush=True)  # fmt: skip
        b2b = back_to_back(pi, root, "bench-pi", reps)
        print(f"back-to-back: {b2b}", flush=True)
        figures = [
            # the CLI's own start-up (a fresh Python process, bench/send_cli.py) dominates: shown, not targeted
            *(
                versus(
                    f"cli_to_pi_{q}",
                    stats(results["cli"])[q],
                    stats(results["bare"])[q],
                    "ms",
                    f"bare sendUserMessage {q}",
                )
                for q in ("p50", "p99")
            ),
            *against("socket_to_pi", results["socket"], results["bare"], "bare sendUserMessage", TARGET),
            *against("pi_to_claude", results["pi_to_claude"], results["raw_to_claude"], "raw Claude line", TARGET),
        ]
        figures.append(figure(
            "back_to_back_lost_or_reordered", b2b["lost"] + b2b["reordered"], "messages", baseline=b2b["messages"],
            baseline_name="messages sent", ratio=(b2b["lost"] + b2b["reordered"]) / b2b["messages"], target="0",
            passed=b2b["lost"] == 0 and b2b["reordered"] == 0,
            summary=f"{b2b['lost']} lost, {b2b['reordered']} reordered of {b2b['messages']} in {b2b['reps']} reps",
        ))  # fmt: skip
        report("pi_delivery", figures, {"rounds": rounds, "back_to_back": b2b})
    finally:
        for s in (a, pi):
            if s is not None:
                s.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
