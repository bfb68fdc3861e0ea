"""Presence across a loopback NATS relay: how soon another machine sees an agent come and go, and how soon a machine
killed -9 disappears, each beside the announce interval measured in the same run.

    .venv/bin/python bench/relay_presence.py [--quick] [-n N]

Starts a real nats-server on 127.0.0.1 (users as docs/relay.md configures them), two state roots as machines
(laptop, gpu), and both relay processes (`crosstalk relay serve`, the default 5 s interval). A bench subscriber
hears laptop's announcements; the gap between two steady ones is the interval (the baseline). Then N times: a fake
agent starts on laptop and the time until gpu's presence file lists it (`read_presence`, what `list --all`,
list_agents and `watch` read) is taken; it stops, and the time until gpu drops it. Last, laptop's relay process is
killed -9 and the time until gpu drops laptop is taken.
Targets: an agent's arrival and departure seen on the other machine, p50 <= 0.25 x the interval (announced on
change, not at the next tick); a machine killed -9 gone within 3 intervals plus the 0.5 s loop (<= 3.2 x).
INFO: the bytes one remote agent adds to a list_agents answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import FakeAgent, emit_result, stats, stop_process
from _common import figure as info_figure
from _common import versus as versus_figure
from _nats import bench_args, connected, join, nats_relay, serve, wait

ON_CHANGE_TARGET = 0.25
EXPIRY_TARGET = 3.2
POLL_S = 0.002


def _interval(url: str) -> float:
    """The gap between two of laptop's steady announcements, heard by a bench subscriber."""
    import nats

    async def run() -> float:
        nc = await nats.connect(url, user="bench", password="pw-bench")
        heard: list[float] = []
        done = asyncio.Event()

        async def on_msg(msg) -> None:
            heard.append(time.monotonic())
            if len(heard) == 3:
                done.set()

        await nc.subscribe("crosstalk.v1.presence.laptop", cb=on_msg)
        await asyncio.wait_for(done.wait(), 30)
        await nc.close()
        return heard[2] - heard[1]

    return asyncio.run(run())


def _until(predicate, what: str, timeout: float) -> float:
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(POLL_S)
    return time.perf_counter() - t0


def main() -> int:
    n = bench_args(__doc__, "agents started and stopped on laptop", 20, 5)
    from crosstalk.registry.paths import StatePaths
    from crosstalk.relay.presence import read_presence
    from crosstalk.shim.listing import agent_rows

    serving: list[subprocess.Popen] = []
    with nats_relay("laptop", "gpu") as (tmp, url, _server):
        try:
            laptop, gpu = tmp / "laptop", tmp / "gpu"
            for root, alias in ((laptop, "laptop"), (gpu, "gpu")):
                root.mkdir(mode=0o700)
                join(root, url, alias)
                serving.append(serve(root, tmp / f"{alias}.relay.log", until_connected=False))
            wait(lambda: connected(laptop) and connected(gpu), "both relay processes connected")
            gpu_paths = StatePaths(gpu)

            def names() -> set[str]:
                return {a.name for a in read_presence(gpu_paths).get("laptop", ())}

            wait(lambda: "laptop" in read_presence(gpu_paths), "gpu hears laptop", 30)
            interval = _interval(url)
            print(f"nats-server {url}; laptop's steady announce interval, measured: {interval:.2f} s")
            arrive: list[float] = []
            depart: list[float] = []
            row_bytes = 0
            for i in range(n):
                agent = FakeAgent(laptop, f"p{i}", inbox=False).start()
                arrive.append(_until(lambda i=i: f"p{i}" in names(), f"p{i}@laptop seen on gpu", 30))
                if i == 0:
                    [row] = [r for r in agent_rows(gpu_paths, {}, None) if r["name"] == "p0@laptop"]
                    row_bytes = len(json.dumps(row, separators=(",", ":"))) + 1
                stopper = threading.Thread(target=agent.stop)
                t0 = time.perf_counter()
                stopper.start()
                stopper.join()
                _until(lambda i=i: f"p{i}" not in names(), f"p{i}@laptop gone from gpu", 30)
                depart.append(time.perf_counter() - t0)
            os.kill(serving[0].pid, signal.SIGKILL)
            expiry = _until(lambda: "laptop" not in read_presence(gpu_paths), "laptop gone from gpu", 4 * interval + 10)
        finally:
            for proc in serving:
                stop_process(proc)

    a, d = stats(arrive), stats(depart)
    arrive_ok = a["p50"] <= ON_CHANGE_TARGET * interval
    depart_ok = d["p50"] <= ON_CHANGE_TARGET * interval
    expiry_ok = expiry <= EXPIRY_TARGET * interval
    print(f"\n{n} agents started and stopped on laptop, seen from gpu:")
    print(f"  arrival   p50 {a['p50']:.3f} s  p99 {a['p99']:.3f} s   ({a['p50'] / interval:.3f} x interval)")
    print(f"  departure p50 {d['p50']:.3f} s  p99 {d['p99']:.3f} s   ({d['p50'] / interval:.3f} x interval)")
    print(f"  laptop's relay process killed -9: gone from gpu after {expiry:.2f} s ({expiry / interval:.2f} x)")
    print(f"  one remote agent adds {row_bytes} bytes to a list_agents answer")
    emit_result(
        "relay_presence",
        [
            versus_figure(
                "an agent arriving on another machine, seen, p50", a["p50"], interval, "ms",
                "the steady announce interval", target=f"<= {ON_CHANGE_TARGET}x", passed=arrive_ok,
            ),
            versus_figure(
                "an agent leaving another machine, seen, p50", d["p50"], interval, "ms",
                "the steady announce interval", target=f"<= {ON_CHANGE_TARGET}x", passed=depart_ok,
            ),
            versus_figure(
                "a machine killed -9, gone from the others", expiry, interval, "ms",
                "the steady announce interval", target=f"<= {EXPIRY_TARGET}x", passed=expiry_ok,
            ),
            info_figure("bytes one remote agent adds to list_agents", row_bytes, "bytes"),
        ],
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
