"""Claude → Qwen and shell → Qwen through crosstalk, beside a raw frame written to the same Qwen session's inbox, in
one run.

A real Qwen Code 0.24.4 TUI in tmux (crosstalk installed with `crosstalk install qwen`) and a real `claude` 2.1.332,
each against its own mock model server. Latency on the mocks' clock, to the Qwen model request carrying the message:

- Claude → Qwen: from the Claude mock sending the `send_message` tool call (Claude's MCP client, the sending shim,
  A2A, the receiving shim's chain and journal, its frame with the child token and the `delivered` receipt).
- shell → Qwen: `crosstalk send NAME TEXT` (a fresh process: its start-up dominates, shown, not targeted) and the
  same send from this process over the agent's socket.
- bare tool: Claude calls `qwen_frame` of bench/bare_deliver.py, a bare MCP server in the same Claude session that
  writes the raw frame below: the same tool call, nothing of crosstalk's in between.
- raw frame: the auth line (the registry token) and a user frame (`fromMode: "bypass"`, the session is in yolo)
  written by this process to the session's inbox: Qwen's own wire with nothing of crosstalk's.

Where Claude → Qwen spends its time, per round, read off crosstalk's trace (crosstalk/fs/trace.py, on one clock with
the mocks'): Claude's MCP client (the mock's tool call → the sending shim reading `tools/call`), crosstalk's own part
(→ the Qwen frame half-closed: `harness_write`), and Qwen (→ its model request), each as p50/p99 (info lines).

    .venv/bin/python bench/qwen_delivery.py [--quick]
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
import uuid
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the live-session scaffolds: tests.support

from _common import exit_on_sigterm, ms, stats, versus
from _live import against, arrival, call_sent, report, settle
from crosstalk.fs.trace import path_for
from crosstalk.harness.qwen.receipts import ReceiptInbox, inbox_dir
from tests.support.live_claude import CROSSTALK, LiveClaude
from tests.support.live_qwen import LiveQwen

TARGET = 1.5
BARE = Path(__file__).resolve().with_name("bare_deliver.py")
# After a turn the TUI asks the model for things of its own (follow-up suggestions, memory) for a second or two; a
# message arriving meanwhile waits for them. Each round starts once no model request came for QUIET_S.
QUIET_S = 2.5


def raw_frame(record: dict, text: str, inbox: ReceiptInbox | None = None, heard: list[float] | None = None) -> None:
    """`inbox`: the frame names it (`from`, `replyToken`), so the session answers with receipts, as crosstalk's
    frames ask it to; `heard` gets the time the `delivered` one came."""
    user = {
        "msgV": 1,
        "msgId": str(uuid.uuid4()),
        "type": "user",
        "fromName": "bench",
        "fromMode": "bypass",
        "toSessionId": record["sessionId"],
        "priority": "next",
        "message": {"role": "user", "content": text},
    }
    if inbox is not None:
        user.update({"from": inbox.path, "replyToken": inbox.token})
        done = heard if heard is not None else []
        inbox.expect(str(user["msgId"]), int(record["pid"]), lambda r: done.append(time.time()))
    lines = [{"msgV": 1, "type": "auth", "token": record["ipcToken"]}, user]
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(record["ipcPath"])
        sock.sendall("".join(json.dumps(x) + "\n" for x in lines).encode())
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)


def idle(q: LiveQwen, quiet_s: float) -> None:
    """No model request at all (the session's turns and its side requests: suggestions, memory) for `quiet_s`."""
    last = -1
    while len(q.mock.model_requests()) != last:
        last = len(q.mock.model_requests())
        time.sleep(quiet_s)


class Trace:
    """crosstalk's trace file, read from an offset: the marks one round wrote."""

    def __init__(self, path: str) -> None:
        self.path, self.offset = path, 0

    def mark(self) -> None:
        self.offset = os.path.getsize(self.path)

    def first(self, ev: str, **fields: object) -> float | None:
        """When (seconds, CLOCK_REALTIME) the round's first `ev` with these fields was marked."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            for line in f.read().splitlines():
                e = json.loads(line)
                if e["ev"] == ev and all(e.get(k) == v for k, v in fields.items()):
                    return float(e["t"]) / 1e9
        return None


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    rounds = 5 if ap.parse_args().quick else 20
    root = Path(tempfile.mkdtemp(prefix="xb", dir="/tmp"))
    (root / "xt").mkdir(mode=0o700)
    Path(path_for(root / "xt")).touch()  # tracing on, for every crosstalk process under this state root
    trace = Trace(path_for(root / "xt"))
    q = c = None
    closers: list = []
    try:
        q = LiveQwen.start(root / "q", crosstalk_home=root / "xt", qwen_home=root / "qwen")
        bare = {"type": "stdio", "command": sys.executable, "args": [str(BARE)], "env": {}}
        c = LiveClaude.start(
            root / "c",
            crosstalk_home=root / "xt",
            extra_env={"QWEN_HOME": str(root / "qwen")},
            mcp_servers={"bare": bare},
        )
        q.say("CALL mcp__crosstalk__list_agents {}")
        q_name = next(r for r in q.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
        c.say("CALL mcp__crosstalk__list_agents {}")
        c.wait_tool_result("list_agents")
        settle(q)
        settle(c)
        from crosstalk.core.message import new_message
        from crosstalk.ingress.client import send
        from crosstalk.registry.paths import StatePaths

        paths = StatePaths(root / "xt")
        cli_env = {"PATH": q.env["PATH"], "HOME": str(root), "CROSSTALK_HOME": str(root / "xt")}
        results: dict[str, list[float]] = {}
        parts: dict[str, list[float]] = {}  # where each way's time goes
        own_inbox = ReceiptInbox(inbox_dir() or root)
        closers.append(own_inbox.close)

        def into_qwen(way: str, text: str, count: bool) -> float:
            trace.mark()
            after, t0, heard = len(q.requests()), time.time(), []
            if way == "claude":
                calls = len(c.mock.tool_calls)
                c.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': q_name, 'text': text})}")
                t0 = call_sent(c.mock, calls)
            elif way == "bare":
                calls, record = len(c.mock.tool_calls), q.record() or {}
                args = {"socket": record["ipcPath"], "token": record["ipcToken"], "session": record["sessionId"]}
                c.say(f"CALL mcp__bare__qwen_frame {json.dumps({**args, 'text': text})}")
                t0 = call_sent(c.mock, calls)
            elif way == "cli":
                subprocess.run([str(CROSSTALK), "send", q_name, text], env=cli_env, check=True, timeout=60,
                               capture_output=True)  # fmt: skip
            elif way == "socket":
                send(paths, new_message(q_name, text, from_="@bench:qwen"))
            elif way == "raw_receipts":
                raw_frame(q.record() or {}, text, own_inbox, heard)
            else:
                raw_frame(q.record() or {}, text)
            at = arrival(q, text, after)
            latency = at - t0
            called = trace.first("tool_call", tool="send_message")
            written = t0 if way.startswith("raw") else trace.first("harness_write", harness="qwen")
            receipt = heard[0] if heard else trace.first("harness_receipt", harness="qwen", status="delivered")
            steps = [called] + [trace.first(ev) for ev in ("a2a_send", "journaled", "inject")] + [written]
            if way == "claude" and count and None not in steps:  # crosstalk's own part, step by step
                names = ("→ a2a_send", "→ journaled", "→ inject", "→ written")
                for name, (a, b) in zip(names, pairwise(steps), strict=True):
                    parts.setdefault(f"claude: own part {name}", []).append(b - a)
            split = {"written → model request": at - written if written else None,
                     "written → receipt": receipt - written if written and receipt else None,
                     "shim tools/call → written": written - called if way == "claude" and written and called else None,
                     "mock call → shim tools/call": called - t0 if way == "claude" and called else None}  # fmt: skip
            for part, seconds in split.items():
                if seconds is not None and count:
                    parts.setdefault(f"{way}: {part}", []).append(seconds)
            idle(q, QUIET_S)
            if way in ("claude", "bare"):
                settle(c)
            return latency

        for i in range(rounds + 1):
            for way in ("claude", "bare", "cli", "socket", "raw", "raw_receipts"):
                latency = into_qwen(way, f"{way}-{secrets.token_hex(5)}", count=i > 0)  # round 0 warms up
                if i:
                    results.setdefault(way, []).append(latency)
        print(", ".join(f"into qwen {w} p50 {ms(stats(results[w])['p50'])}" for w in results), flush=True)
        for part, seconds in sorted(parts.items()):
            x = stats(seconds)
            print(f"  {part}: p50 {ms(x['p50'])}, p99 {ms(x['p99'])} (n={x['n']})", flush=True)
        figures = [
            *against("claude_to_qwen", results["claude"], results["raw"], "raw Qwen frame", TARGET),
            *against("claude_to_qwen_vs_bare_tool", results["claude"], results["bare"], "bare tool", TARGET),
            *against("socket_to_qwen", results["socket"], results["raw"], "raw Qwen frame", TARGET),
            *(
                versus(
                    f"cli_to_qwen_{p}", stats(results["cli"])[p], stats(results["raw"])[p], "ms", f"raw Qwen frame {p}"
                )
                for p in ("p50", "p99")
            ),
        ]
        report("qwen_delivery", figures, {"rounds": rounds})
    finally:
        for close in closers:
            close()
        for s in (c, q):
            if s is not None:
                s.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
