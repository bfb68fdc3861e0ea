"""crosstalk's own part of a delivery without live harnesses: where each step goes, fake → fake, repeatable.

    .venv/bin/python bench/own_steps.py [--quick] [-n N] [--profile DIR]

Two `crosstalk mcp --harness fake` processes (bench/shim_tools.py's `RawShim`), alice → bob, N `send_message` calls
GAP_S apart (an idle receiver, as a live conversation's), with the bench trace on (crosstalk/fs/trace.py). For each
message the steps' times from the sending shim's `tool_call`: `a2a_send` (bound, routed, message built, sender),
`frame_in` (the task frame read by bob's process), `journaled` (received + task + claim fsynced), `inject`,
`harness_write` (the fake adapter's inbox line written), then `tool_result` (alice's answer). The own part is
`harness_write`; beside it, the same run's floor (bench/floor.py: a unix-socket round trip with one fsync to a
separate process), the least any delivery that is durable before the harness can cost.

With --profile DIR both shims run under cProfile (slower: the times then are not the figures) and DIR gets
alice.prof and bob.prof; the top functions by own time of each are printed.
"""

from __future__ import annotations

import argparse
import json
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import PYTHON, emit_result, exit_on_sigterm, make_tmp, print_machine, remove_tmp, stats, versus
from crosstalk.fs.trace import path_for
from floor import FloorServer
from floor import measure as floor_measure
from shim_tools import RawShim

GAP_S = 0.02
STEPS = ("a2a_send", "frame_in", "journaled", "inject", "harness_write", "tool_result")
PROFILED = """
import cProfile, sys
sys.argv = ["crosstalk", "mcp", "--harness", "fake"]
from crosstalk.cli.main import script
p = cProfile.Profile()
p.enable()
try:
    script()
finally:
    p.disable()
    p.dump_stats(sys.argv_out)
"""


class ProfiledShim(RawShim):
    """A RawShim whose process runs under cProfile and writes its stats to `out` when its stdin closes."""

    def __init__(self, root: Path, tag: str, out: Path) -> None:
        super().__init__(root, tag)
        self.out = out

    def start(self) -> RawShim:
        (self.root / "inbox").mkdir(exist_ok=True)
        self._stderr = open(self.root / f"shim-{self.tag}.stderr", "wb")  # noqa: SIM115 (closed in stop)
        code = PROFILED.replace("sys.argv_out", repr(str(self.out)))
        self.proc = subprocess.Popen(
            [PYTHON, "-c", code], env=self.env, cwd=self.root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr,
        )  # fmt: skip
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        self.request("initialize", init)
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.request("tools/list", {})
        return self

    def stop(self) -> None:
        """Close stdin (the shim ends on EOF and the profile is written), then stop it as any other."""
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # stop_process below ends it
                pass
        super().stop()


def per_message(events: list[dict[str, Any]], alice_pid: int, steps: tuple[str, ...]) -> list[dict[str, float]]:
    """Each send_message's steps, ms from its tool_call (events in file order, one message at a time)."""
    out: list[dict[str, float]] = []
    cur: dict[str, float] | None = None
    t0 = 0
    for e in events:
        if e["ev"] == "tool_call" and e.get("tool") == "send_message" and e["pid"] == alice_pid:
            cur, t0 = {}, e["t"]
            out.append(cur)
        elif cur is not None and e["ev"] in steps and e["ev"] not in cur:
            if e["ev"] == "harness_write" and e.get("harness") != "fake":
                continue
            cur[e["ev"]] = (e["t"] - t0) / 1e6
    return [m for m in out if "harness_write" in m]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument("-n", type=int, default=None, help="send_message calls measured (default 400, quick 100)")
    ap.add_argument("--profile", default=None, help="run both shims under cProfile, stats into this directory")
    ap.add_argument("--extra", default="", help="more trace events to tabulate, in order (marks added to look closer)")
    args = ap.parse_args()
    steps_seen = (*STEPS[:2], *args.extra.split(","), *STEPS[2:]) if args.extra else STEPS
    exit_on_sigterm()
    n = args.n or (100 if args.quick else 400)
    print_machine()
    print(f"own_steps: {n} send_message calls alice → bob (fake harnesses), {GAP_S * 1e3:.0f} ms apart, trace on")
    tmp = make_tmp()
    prof = Path(args.profile).resolve() if args.profile else None
    a = b = None
    try:
        (tmp / "st").mkdir(mode=0o700)
        trace_file = Path(path_for(tmp / "st"))
        trace_file.touch()
        if prof is not None:
            prof.mkdir(parents=True, exist_ok=True)
            b = ProfiledShim(tmp, "b", prof / "bob.prof").start()
            a = ProfiledShim(tmp, "a", prof / "alice.prof").start()
        else:
            b = RawShim(tmp, "b").start()
            a = RawShim(tmp, "a").start()
        assert b.call("list_agents", "s-bob", "bob")["state"] == "ok"
        assert a.call("list_agents", "s-alice", "alice")["state"] == "ok"
        for i in range(20):  # warm-up: imports, the kept connection, caches
            a.call("send_message", "s-alice", "alice", to="bob", text=f"warm {i}")
            time.sleep(GAP_S)
        offset = trace_file.stat().st_size
        floor: list[float] = []
        with FloorServer(fsync=True, tmp=tmp) as fs:
            for i in range(n):
                res = a.call("send_message", "s-alice", "alice", to="bob", text=f"own steps {i}")
                if res.get("state") != "accepted":
                    raise RuntimeError(f"send {i}: {res}")
                time.sleep(GAP_S)
                if i % 10 == 0:
                    floor += floor_measure(fs.sock_path, 2)
        with open(trace_file, "rb") as f:
            f.seek(offset)
            events = [json.loads(line) for line in f.read().splitlines() if line.strip()]
        msgs = per_message(events, a.pid, steps_seen)
    finally:
        for shim in (a, b):
            if shim is not None:
                shim.stop()
        remove_tmp(tmp)
    if len(msgs) < n * 0.9:
        raise RuntimeError(f"only {len(msgs)} of {n} messages traced to the fake's write")
    steps = {s: stats([m[s] for m in msgs if s in m]) for s in steps_seen if any(s in m for m in msgs)}
    f = stats(floor)
    print(f"  {len(msgs)} messages; p50 (p90) ms from alice's tool_call:")
    prev = 0.0
    for s, st in steps.items():
        p50 = st["p50"]
        print(f"    {s:<14} {p50:6.2f} ({st['p90']:6.2f})   {p50 - prev:+5.2f}")
        prev = p50
    print(f"  same-run floor (uds round trip + fsync): p50 {f['p50'] * 1e3:.2f} ms")
    if prof is not None:
        for who in ("alice", "bob"):
            print(f"\n  {who}: top functions by own time")
            pstats.Stats(str(prof / f"{who}.prof")).sort_stats("tottime").print_stats(25)
    own = steps["harness_write"]["p50"]
    emit_result(
        "own_steps",
        [
            versus(
                "own part fake -> fake p50 (tool call -> fake write)",
                own / 1e3,
                f["p50"],
                "ms",
                "uds round trip + fsync p50 (floor)",
                summary="no live harness: where crosstalk's own steps go (info; the target is own_part.py's, live)",
            ),
        ],
        {"steps_p50_ms": {s: st["p50"] for s, st in steps.items()}, "n": len(msgs), "profiled": prof is not None},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
