"""crosstalk's own part of a live delivery, per receiving harness, beside bare deliveries started by the same tool call.

One real `claude` 2.1.332 session A sends; the receivers are a second Claude session B (same Claude config dir, so
Claude's own SendMessage reaches it), a thread on the real `codex app-server` 0.171.0 and a real pi 0.73.1 (RPC
mode, bench/pi/bare_inbox.ts loaded beside crosstalk), each against its own mock model server. A also loads
bench/bare_deliver.py, a bare MCP server whose tools put a message into each receiver with no crosstalk between:
`claude_line` (a line into B's messaging socket, as Claude's SendMessage writes it), `turn_start` (`turn/start` over
its own kept app-server connection), `pi_line` (a line to the bare pi extension).

crosstalk's own part is read off timestamps crosstalk writes when `$CROSSTALK_HOME/bench-trace.jsonl` exists
(crosstalk/fs/trace.py): from A's shim reading the `tools/call` line (`tool_call`) to the receiving adapter's write
into its harness (`harness_write`: the Claude socket frame written and half-closed, Codex's `turn/start` sent, the pi
link's `deliver` line flushed); on the way, the receiving chain's `chain_in`, `journaled` (received + task + claim
fsynced) and `inject`. Target: own part p50 <= 3 ms for each harness. Beside it, end to end on the mocks' clock
(A's tool call leaving A's mock → the receiver's model request carrying the message): crosstalk's `send_message`
against the bare tool (and, for Claude, Claude's own SendMessage; for Codex, a bare `turn/start` written by this
process). Target: Claude → idle Codex <= 1.2x the bare tool.

    .venv/bin/python bench/own_part.py [--quick] [--only claude,codex,pi] [--extra EV,EV]

--extra names more trace events of the receiving process to tabulate before the adapter's write (marks added to
look closer at a step; bench/own_steps.py does the same without live harnesses).
"""

from __future__ import annotations

import argparse
import json
import os
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

from _common import exit_on_sigterm, ms, stats, versus
from _live import against, arrival, call_sent, report, settle, wait_for
from crosstalk.fs.trace import path_for
from tests.support.live_claude import LiveClaude
from tests.support.live_codex import LiveCodex
from tests.support.live_pi import LivePi

OWN_TARGET_S = 0.003
CODEX_TARGET = 1.2
BARE = [sys.executable, str(Path(__file__).resolve().with_name("bare_deliver.py"))]
BARE_EXT = Path(__file__).resolve().parent / "pi" / "bare_inbox.ts"
HARNESSES = ("claude", "codex", "pi")
SENDER_STEPS = ("a2a_send",)  # in A's shim, after its `tool_call`
RECEIVER_STEPS = ("a2a_in", "a2a_authed", "a2a_handler", "frame_in", "journaled", "inject")  # frame_in: a task frame
AFTER_STEPS = ("task_recorded",)  # in the receiving process, after its write


class Trace:
    """The trace file, read from an offset: the events one round wrote."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0

    def mark(self) -> None:
        self.offset = os.path.getsize(self.path)

    def events(self) -> list[dict[str, Any]]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]

    def own_part(self, harness: str, extra: tuple[str, ...] = ()) -> dict[str, float] | None:
        """Seconds from A's shim's send_message `tools/call` to each later step, up to the receiving adapter's write."""
        evs = self.events()
        call = next((e for e in evs if e["ev"] == "tool_call" and e.get("tool") == "send_message"), None)
        if call is None:
            return None
        after = [e for e in evs if e["t"] >= call["t"] and e["pid"] != call["pid"]]
        writes = ("turn/start", "turn/steer", "thread/inject_items")  # Codex's; the others name no method
        write = next((e for e in after if e["ev"] == "harness_write" and e.get("harness") == harness
                      and e.get("method") in (None, *writes)), None)  # fmt: skip
        if write is None:
            return None
        out = {"harness_write": (write["t"] - call["t"]) / 1e9}
        for step in SENDER_STEPS:
            e = next((e for e in evs if e["ev"] == step and e["pid"] == call["pid"] and e["t"] >= call["t"]), None)
            if e is not None:
                out[step] = (e["t"] - call["t"]) / 1e9
        for step in (*RECEIVER_STEPS, *extra):
            e = next((e for e in after if e["ev"] == step and e["pid"] == write["pid"] and e["t"] <= write["t"]), None)
            if e is not None:
                out[step] = (e["t"] - call["t"]) / 1e9
        for step in AFTER_STEPS:
            e = next((e for e in after if e["ev"] == step and e["pid"] == write["pid"] and e["t"] >= write["t"]), None)
            if e is not None:
                out[step] = (e["t"] - call["t"]) / 1e9
        done = next((e for e in evs if e["ev"] == "tool_result" and e["pid"] == call["pid"]), None)
        if done is not None:
            out["tool_result"] = (done["t"] - call["t"]) / 1e9
        return out


def by_tool(a: LiveClaude, receiver: Any, call: str, token: str) -> float:
    """A's model calls a tool (`call`: the mock's CALL line): from that call leaving A's mock to the receiver's model
    request carrying `token`."""
    after, calls = len(receiver.requests()), len(a.mock.tool_calls)
    a.say(call)
    sent = call_sent(a.mock, calls)
    return arrival(receiver, token, after) - sent


def quiet(*sessions: Any) -> None:
    for s in sessions:
        if isinstance(s, LivePi):
            s.idle(quiet_s=0.15)
        else:
            settle(s)


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(HARNESSES))
    ap.add_argument("--extra", default="", help="more receiving-side trace events to tabulate, in order")
    args = ap.parse_args()
    looks = tuple(e for e in args.extra.split(",") if e)
    rounds = 5 if args.quick else 20
    only = [h for h in args.only.split(",") if h]
    root = Path(tempfile.mkdtemp(prefix="xo", dir="/tmp"))
    home = root / "xt"
    home.mkdir(mode=0o700)
    Path(path_for(home)).touch()  # tracing on, for every crosstalk process under this state root
    trace = Trace(path_for(home))
    sessions: list[Any] = []
    try:
        bare = {"type": "stdio", "command": BARE[0], "args": BARE[1:], "env": {}}
        a = LiveClaude.start(
            root / "alpha", crosstalk_home=home, config_dir=root / "claude", mcp_servers={"bare": bare}
        )
        sessions.append(a)
        a.say("CALL mcp__crosstalk__list_agents {}")
        a.wait_tool_result("list_agents")
        settle(a)
        ways: dict[str, dict[str, Callable[[str], float]]] = {}
        receivers: dict[str, Any] = {}
        if "claude" in only:
            b = LiveClaude.start(root / "beta", crosstalk_home=home, config_dir=root / "claude")
            sessions.append(b)
            b.say("CALL mcp__crosstalk__list_agents {}")
            b.wait_tool_result("list_agents")
            settle(b)
            b_name, b_native = b.agent().name, (b.record() or {})["name"]
            b_socket = (b.record() or {})["messagingSocketPath"]
            receivers["claude"] = b
            ways["claude"] = {
                "crosstalk": lambda t: by_tool(a, b, f"CALL mcp__crosstalk__send_message {json.dumps({'to': b_name, 'text': t})}", t),  # noqa: E501
                "bare_tool": lambda t: by_tool(a, b, f"CALL mcp__bare__claude_line {json.dumps({'socket': b_socket, 'text': t})}", t),  # noqa: E501
                "native": lambda t: by_tool(a, b, f"CALL SendMessage {json.dumps({'to': b_native, 'message': t, 'summary': 'bench'})}", t),  # noqa: E501
            }  # fmt: skip
        if "codex" in only:
            cx = LiveCodex.start(root / "cx", crosstalk_home=home)
            sessions.append(cx)
            thread = cx.start_thread()
            cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
            cx_name = next(r for r in cx.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
            settle(cx)
            receivers["codex"] = cx

            def direct(t: str) -> float:
                after, t0 = len(cx.requests()), time.time()
                cx.say(thread, t)
                return arrival(cx, t, after) - t0

            ways["codex"] = {
                "crosstalk": lambda t: by_tool(a, cx, f"CALL mcp__crosstalk__send_message {json.dumps({'to': cx_name, 'text': t})}", t),  # noqa: E501
                "bare_tool": lambda t: by_tool(a, cx, f"CALL mcp__bare__turn_start {json.dumps({'socket': str(cx.socket), 'thread': thread, 'text': t})}", t),  # noqa: E501
                "bare_turn_start": direct,
            }  # fmt: skip
        if "pi" in only:
            bare_sock = str(root / "bare.sock")
            pi = LivePi.start(root / "p", crosstalk_home=home, args=("-e", str(BARE_EXT)),
                              PI_CROSSTALK_HANDLE="bench-pi", BARE_INBOX_SOCK=bare_sock)  # fmt: skip
            sessions.append(pi)
            wait_for(lambda: os.path.exists(bare_sock), "the bare extension's socket")
            pi.idle()
            receivers["pi"] = pi
            ways["pi"] = {
                "crosstalk": lambda t: by_tool(a, pi, f"CALL mcp__crosstalk__send_message {json.dumps({'to': 'bench-pi', 'text': t})}", t),  # noqa: E501
                "bare_tool": lambda t: by_tool(a, pi, f"CALL mcp__bare__pi_line {json.dumps({'socket': bare_sock, 'text': t})}", t),  # noqa: E501
            }  # fmt: skip
        e2e: dict[str, list[float]] = {}
        own: dict[str, list[dict[str, float]]] = {}
        for h in only:
            for i in range(rounds + 1):  # the first round warms every path up
                for way, deliver in ways[h].items():
                    trace.mark()
                    latency = deliver(f"{way[:2]}-{secrets.token_hex(5)}")
                    quiet(a, receivers[h])
                    if not i:
                        continue
                    e2e.setdefault(f"{h}_{way}", []).append(latency)
                    if way == "crosstalk":
                        part = trace.own_part(h, looks)
                        if part is None:
                            raise RuntimeError(f"{h}: no trace of the delivery: {trace.events()}")
                        own.setdefault(h, []).append(part)
            o = stats(p["harness_write"] for p in own[h])
            print(f"{h}: own part p50 {ms(o['p50'])}; end to end p50 " + ", ".join(
                f"{w} {ms(stats(e2e[f'{h}_{w}'])['p50'])}" for w in ways[h]), flush=True)  # fmt: skip
        figures: list[dict[str, Any]] = []
        extra: dict[str, Any] = {"rounds": rounds, "steps_p50_ms": {}}
        for h in only:
            parts = own[h]
            o = stats(p["harness_write"] for p in parts)
            bare_p50 = stats(e2e[f"{h}_bare_tool"])["p50"]
            names = (*SENDER_STEPS, *RECEIVER_STEPS, *looks, "harness_write", *AFTER_STEPS, "tool_result")
            steps = {s: stats(p[s] for p in parts if s in p)["p50"] * 1e3 for s in names if any(s in p for p in parts)}
            extra["steps_p50_ms"][h] = steps
            print(f"{h} own part, p50 from the tool call (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in steps.items()))
            figures.append(versus(
                f"own_part_{h}_p50", o["p50"], bare_p50, "ms", "bare tool end to end p50", target="<= 3 ms",
                passed=o["p50"] <= OWN_TARGET_S,
                summary=f"tool call -> {h} adapter write; p99 {o['p99'] * 1e3:.1f} ms",
            ))  # fmt: skip
            figures.append(versus(
                f"own_part_{h}_p99", o["p99"], stats(e2e[f"{h}_bare_tool"])["p99"], "ms", "bare tool end to end p99"
            ))  # fmt: skip
            ours = e2e[f"{h}_crosstalk"]
            target = CODEX_TARGET if h == "codex" else None
            for way in ways[h]:
                if way == "crosstalk":
                    continue
                if target is not None and way == "bare_tool":
                    figures += against(f"claude_to_{h}_idle", ours, e2e[f"{h}_{way}"], way.replace("_", " "), target)
                else:
                    c, w = stats(ours), stats(e2e[f"{h}_{way}"])
                    figures.append(versus(f"claude_to_{h}_vs_{way}_p50", c["p50"], w["p50"], "ms",
                                          f"{way.replace('_', ' ')} p50"))  # fmt: skip
        report("own_part", figures, extra)
    finally:
        for s in reversed(sessions):
            s.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
