"""The shim's tools end to end: send_message tool call → injected at the receiving agent, and shim memory per agent.

    .venv/bin/python bench/shim_tools.py [--quick] [-n N]

Two `crosstalk mcp --harness fake` processes, driven by raw JSON-RPC lines over their stdin/stdout (no SDK on the
client side); each call carries its fake session in `_meta` ("crosstalk/session", "crosstalk/name"). Shim A binds
agent `alice`, shim B binds `bob` (fake harness, inbox CROSSTALK_FAKE_INBOX_DIR/bob.jsonl).

(a) Latency: from writing a `tools/call send_message(to=bob)` line into shim A until its result line is read. The
    result is `accepted` only after bob's harness wrote the message (the fake appends its inbox line before it
    returns), so this time includes the injection; every sample is checked to be `accepted`, and bob's inbox is
    checked to hold every message. Beside it, the same-run floor (bench/floor.py: a unix-socket round trip with one
    fsync to a separate process).
(b) Memory: VmRSS of a shim idle after initialize + tools/list, then after binding 1, 2 and 4 agents (different
    `crosstalk/session` values; the first bound agent loads the agent machinery; the A2A stack loads only when an
    A2A client connects: bench/shim_memory.py).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    emit_result,
    exit_on_sigterm,
    figure,
    make_tmp,
    print_machine,
    proc_status_kb,
    remove_tmp,
    stats,
    stop_process,
)
from floor import FloorServer, interleave, vs_floor_figures
from floor import measure as floor_measure

CROSSTALK = str(Path(PYTHON).parent / "crosstalk")
CALL_TIMEOUT_S = 30.0
TARGET_RSS_MB = 60.0


class RawShim:
    """One `crosstalk mcp --harness fake` process and a line-oriented JSON-RPC client for it."""

    def __init__(self, root: Path, tag: str) -> None:
        self.root = root
        self.env = {
            **os.environ,
            "CROSSTALK_HOME": str(root / "st"),
            "CROSSTALK_FAKE_INBOX_DIR": str(root / "inbox"),
        }
        self.tag = tag
        self.proc: subprocess.Popen | None = None
        self._buf = b""
        self._next_id = 0
        self._stderr = None

    def start(self) -> RawShim:
        (self.root / "inbox").mkdir(exist_ok=True)
        self._stderr = open(self.root / f"shim-{self.tag}.stderr", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [CROSSTALK, "mcp", "--harness", "fake"],
            env=self.env,
            cwd=self.root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        self.request("initialize", init)
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.request("tools/list", {})
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def write(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def read_answer(self, rid: int, timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == rid:
                    if "error" in msg:
                        raise RuntimeError(f"shim {self.tag}: {msg['error']}")
                    return msg["result"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"shim {self.tag}: no answer to request {rid} within {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise RuntimeError(f"shim {self.tag} closed its stdout (exit {self.proc.poll()})")
                self._buf += chunk

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        self.write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.read_answer(rid)

    def call(self, tool: str, session: str, name: str | None = None, **args: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"crosstalk/session": session}
        if name:
            meta["crosstalk/name"] = name
        result = self.request("tools/call", {"name": tool, "arguments": args, "_meta": meta})
        return result["structuredContent"]

    def rss_kb(self) -> int:
        kb = proc_status_kb(self.pid, "VmRSS")
        if "VmRSS" not in kb:
            raise RuntimeError("no VmRSS")
        return kb["VmRSS"]

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def inbox_lines(root: Path, name: str) -> int:
    path = root / "inbox" / f"{name}.jsonl"
    try:
        return sum(1 for line in path.read_bytes().splitlines() if line.strip())
    except FileNotFoundError:
        return 0


def measure_send(a: RawShim, root: Path, n: int) -> list[float]:
    out: list[float] = []
    before = inbox_lines(root, "bob")
    clock = time.perf_counter
    for i in range(n):
        t0 = clock()
        res = a.call("send_message", "s-alice", "alice", to="bob", text=f"bench message {i}")
        out.append(clock() - t0)
        if res.get("state") != "accepted":
            raise RuntimeError(f"send {i}: {res}")
    got = inbox_lines(root, "bob") - before
    if got != n:
        raise RuntimeError(f"bob's inbox holds {got} of {n} messages")
    return out


def measure_memory(root: Path) -> dict[str, int]:
    shim = RawShim(root, "mem").start()
    try:
        time.sleep(0.5)
        rss = {"idle": shim.rss_kb()}
        bound = 0
        for target in (1, 2, 4):
            while bound < target:
                res = shim.call("list_agents", f"mem-{bound}", f"mem{bound}")
                if res.get("state") != "ok":
                    raise RuntimeError(f"binding mem-{bound}: {res}")
                bound += 1
            time.sleep(0.5)
            rss[f"agents_{target}"] = shim.rss_kb()
        return rss
    finally:
        shim.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument("-n", type=int, default=None, help="send_message calls measured (default 400, quick 60)")
    args = ap.parse_args()
    exit_on_sigterm()
    n = args.n or (60 if args.quick else 400)
    warm = min(20, n)
    print_machine()
    print(f"shim_tools: {n} send_message calls alice → bob through two `crosstalk mcp --harness fake` processes")
    tmp = make_tmp()
    a = b = None
    try:
        b = RawShim(tmp, "b").start()
        a = RawShim(tmp, "a").start()
        assert b.call("list_agents", "s-bob", "bob")["state"] == "ok"  # bob registers
        assert a.call("list_agents", "s-alice", "alice")["state"] == "ok"
        with FloorServer(fsync=True, tmp=tmp) as fs:
            measure_send(a, tmp, warm)
            floor_measure(fs.sock_path, warm)
            blocks = 10
            sends, floor = interleave(
                blocks,
                lambda: measure_send(a, tmp, n // blocks),
                lambda: floor_measure(fs.sock_path, max(1, n // blocks)),
            )
        a.stop()
        b.stop()
        a = b = None
        rss = measure_memory(tmp)
    finally:
        for shim in (a, b):
            if shim is not None:
                shim.stop()
        remove_tmp(tmp)

    s, f = stats(sends), stats(floor)
    idle_mb = rss["idle"] / 1024
    first_mb = (rss["agents_1"] - rss["idle"]) / 1024
    extra_mb = (rss["agents_4"] - rss["agents_1"]) / 3 / 1024
    print(f"  send_message → injected at bob (tool result)  p50 {s['p50'] * 1e3:.2f} ms  p99 {s['p99'] * 1e3:.2f} ms")
    print(f"  same-run floor (uds round trip + fsync)       p50 {f['p50'] * 1e3:.2f} ms  p99 {f['p99'] * 1e3:.2f} ms")
    print(
        f"  shim RSS: idle {idle_mb:.1f} MB; 1 agent {rss['agents_1'] / 1024:.1f} MB, 2 agents "
        f"{rss['agents_2'] / 1024:.1f} MB, 4 agents {rss['agents_4'] / 1024:.1f} MB"
    )
    print(f"  first bound agent +{first_mb:.1f} MB (the agent machinery); each extra agent +{extra_mb:.2f} MB")
    emit_result(
        "shim_tools",
        [
            *vs_floor_figures(
                "send_message → injected {q}",
                s,
                f,
                unit="ms",
                summary="tool call written → result read (accepted = the receiver's harness wrote it)",
            ),
            figure(
                "shim RSS idle",
                idle_mb,
                "MB",
                target=f"<= {TARGET_RSS_MB:.0f} MB",
                passed=idle_mb <= TARGET_RSS_MB,
            ),
            figure("shim RSS, first bound agent", first_mb, "MB"),
            figure("shim RSS per extra agent", extra_mb, "MB"),
        ],
        {"rss_kb": rss},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
