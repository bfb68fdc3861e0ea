"""Resident memory of a session's crosstalk: the `crosstalk mcp` shim with one bound agent that sends and receives.

    .venv/bin/python bench/shim_memory.py [--quick] [-n N]

Two `crosstalk mcp --harness fake` processes (shim_tools.RawShim), A binding `alice` and B binding `bob`. VmRSS of
shim A (from /proc/PID/status) is read idle (after initialize + tools/list), bound (after its first bound call), and
after every quarter of N rounds; each round alice sends bob one message and bob sends alice one (N sent and N
received by each agent), and every 50th round is an ask from alice that bob answers with `reply` (the reply
travels back into alice's session). Every send must be `accepted` (asks `submitted`), and each inbox must hold every
message. Beside it, in the same run: a bare interpreter waiting on stdin, and shim B again after an A2A 1.0 client
(the SDK's, in this process) fetched its agent card and sent it one message: the A2A endpoint loads its stack only
then, and that figure is what every bound shim carried before task frames.

Then N more rounds, to show where the growth of the first N stops: an agent keeps its newest 1,000 settled messages
and tasks in memory (journal/window.py MAX_SETTLED; its journal is compacted to match), so RSS rises while that
window fills, then stays flat.

Targets: shim A after N and after 2N rounds <= 35 MB; flat once the window is full: growth from N to
2N rounds <= 1 MB (checked when N >= the window; a quick run reports it only).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    emit_result,
    exit_on_sigterm,
    figure,
    make_tmp,
    print_machine,
    proc_status_kb,
    read_line,
    remove_tmp,
    stats,
    stop_process,
    versus,
)
from crosstalk.journal.window import MAX_SETTLED
from shim_tools import RawShim, inbox_lines

TARGET_MB = 35.0
FLAT_MB = 1.0
ASK_EVERY = 50
SETTLE_S = 0.3


def bare_rss_kb() -> int:
    import subprocess

    proc = subprocess.Popen(
        [PYTHON, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        read_line(proc, 30)
        time.sleep(SETTLE_S)
        return proc_status_kb(proc.pid, "VmRSS")["VmRSS"]
    finally:
        stop_process(proc)


def rss_mb(shim: RawShim) -> float:
    time.sleep(SETTLE_S)
    return shim.rss_kb() / 1024


def one_round(a: RawShim, b: RawShim, i: int) -> None:
    if i % ASK_EVERY == ASK_EVERY - 1:
        asked = a.call("ask", "s-alice", "alice", to="bob", text=f"question {i}?", deadline_seconds=60)
        if asked.get("state") not in ("submitted", "accepted"):
            raise RuntimeError(f"ask {i}: {asked}")
        replied = wait_reply(b, asked["message_id"], i)
        if replied.get("forwarded", {}).get("state") != "accepted":
            raise RuntimeError(f"reply {i}: {replied}")
    else:
        out = a.call("send_message", "s-alice", "alice", to="bob", text=f"alice to bob {i}")
        if out.get("state") != "accepted":
            raise RuntimeError(f"send {i} alice → bob: {out}")
    out = b.call("send_message", "s-bob", "bob", to="alice", text=f"bob to alice {i}")
    if out.get("state") != "accepted":
        raise RuntimeError(f"send {i} bob → alice: {out}")


def wait_reply(b: RawShim, mid: str, i: int) -> dict:
    deadline = time.monotonic() + 30
    while True:  # the ask is answered at once by alice's shim; its delivery into bob settles a moment later
        out = b.call("reply", "s-bob", "bob", message_id=mid, text=f"answer {i}")
        if out.get("state") == "replied" or time.monotonic() > deadline:
            return out
        time.sleep(0.01)


def a2a_touch(b: RawShim) -> None:
    """An A2A 1.0 client (the SDK's) fetches bob's card and sends bob one message, as a foreign agent would."""
    import json

    from crosstalk.core.message import new_message
    from crosstalk.ingress.a2a.client import A2AClient, fetch_card
    from crosstalk.registry.credentials import read_key
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.paths import StatePaths

    paths = StatePaths(Path(b.env["CROSSTALK_HOME"]))
    bob, alice = resolve(paths, "bob"), resolve(paths, "alice")
    token = read_key(paths.token_path(alice.agent_id))

    async def run() -> str:
        card = await fetch_card(bob.a2a_url or "")
        async with A2AClient(bob.a2a_url or "", token) as client:
            view = await client.send(new_message("bob", "hello over A2A", from_="alice"))
        return f"{card['name']}: {json.dumps(view.answer.to_dict() if view.answer else None)}"

    print(f"  A2A client: card and SendMessage answered ({asyncio.run(run())})")


def send_ab(b: RawShim, rounds: int) -> dict[str, list[float]]:
    """One message at a time to bob, alternately as a task frame on bob's socket and as an A2A SendMessage, from an
    agent this process hosts (a task frame's sender must be its agent's own process): seconds per send."""
    from crosstalk.agent import AgentConfig, AgentHost
    from crosstalk.core.message import new_message
    from crosstalk.harness.fake import FakeHarness
    from crosstalk.ingress.a2a.client import A2AClient
    from crosstalk.ingress.uds_task_client import UdsTaskClient
    from crosstalk.registry.credentials import read_key
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.paths import StatePaths

    paths = StatePaths(Path(b.env["CROSSTALK_HOME"]))

    async def run() -> dict[str, list[float]]:
        config = AgentConfig(harness=FakeHarness(), session_ref="s-carol", preferred_name="carol", a2a=True)
        carol = await AgentHost.start(paths, config)
        try:
            bob = resolve(paths, "bob")
            token = read_key(paths.token_path(carol.agent_id))
            frames = UdsTaskClient(bob.uds_path, read_key(paths.key_path(bob.agent_id)), token)
            out: dict[str, list[float]] = {"task frame": [], "A2A SendMessage": []}
            async with A2AClient(bob.a2a_url or "", token) as a2a:
                for i in range(rounds):
                    for name, client in (("task frame", frames), ("A2A SendMessage", a2a)):
                        t0 = time.perf_counter()
                        view = await client.send(new_message("bob", f"ab {i}", from_="carol"))
                        out[name].append(time.perf_counter() - t0)
                        if view.answer is None or view.answer.state.value != "accepted":
                            raise RuntimeError(f"{name} send {i}: {view.answer}")
            return {k: v[min(20, rounds // 5) :] for k, v in out.items()}  # without the warm-up
        finally:
            await carol.close()

    return asyncio.run(run())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run (300 + 300 rounds)")
    ap.add_argument("-n", type=int, default=None, help="rounds, then as many again (default 1000, quick 300)")
    args = ap.parse_args()
    exit_on_sigterm()
    n = args.n or (300 if args.quick else 1000)
    print_machine()
    print(f"shim_memory: VmRSS of `crosstalk mcp` (alice) over {n} messages sent and {n} received")
    tmp = make_tmp()
    a = b = None
    try:
        bare = statistics.median(bare_rss_kb() for _ in range(3)) / 1024
        b = RawShim(tmp, "b").start()
        a = RawShim(tmp, "a").start()
        idle = rss_mb(a)
        assert a.call("list_agents", "s-alice", "alice")["state"] == "ok"
        assert b.call("list_agents", "s-bob", "bob")["state"] == "ok"
        bound = rss_mb(a)
        b_bound = rss_mb(b)
        curve: list[tuple[int, float]] = [(0, bound)]
        t0 = time.perf_counter()
        for i in range(2 * n):
            one_round(a, b, i)
            if (i + 1) % max(1, n // 4) == 0:
                curve.append((i + 1, rss_mb(a)))
        elapsed = time.perf_counter() - t0
        to_bob, to_alice = inbox_lines(tmp, "bob"), inbox_lines(tmp, "alice")
        asks = 2 * n // ASK_EVERY
        if to_bob != 2 * n or to_alice != 2 * n + asks:  # alice also got one reply per ask
            raise RuntimeError(f"inboxes hold {to_bob} (bob) and {to_alice} (alice); expected {2 * n} and more")
        b_before = rss_mb(b)
        a2a_touch(b)
        b_after = rss_mb(b)
        ab = send_ab(b, 60 if args.quick else 300)
        hwm = proc_status_kb(a.pid, "VmHWM")["VmHWM"] / 1024
    finally:
        for shim in (a, b):
            if shim is not None:
                shim.stop()
        remove_tmp(tmp)

    at = dict(curve)
    at_n, last = at.get(n, curve[len(curve) // 2][1]), curve[-1][1]
    fill, flat = at_n - bound, last - at_n
    window = n >= MAX_SETTLED
    print(f"  bare interpreter                   {bare:6.1f} MB")
    print(f"  shim A idle                        {idle:6.1f} MB")
    print(f"  shim A, alice bound                {bound:6.1f} MB   (shim B, bob bound: {b_bound:.1f} MB)")
    for done, mb in curve[1:]:
        print(f"  shim A after {done:5d} sent + {done:5d} received  {mb:6.1f} MB")
    print(f"  shim A peak (VmHWM)                {hwm:6.1f} MB")
    print(f"  growth 0 → {n} rounds (the window filling)   {fill:+6.2f} MB")
    aim = f"target <= {FLAT_MB:.0f} MB" if window else f"INFO: {n} rounds do not fill the window"
    print(f"  growth {n} → {2 * n} rounds                  {flat:+6.2f} MB ({aim})")
    print(f"  shim B before / after one A2A client: {b_before:.1f} → {b_after:.1f} MB (+{b_after - b_before:.1f} MB)")
    print(f"  {4 * n + asks} tool calls in {elapsed:.1f} s")
    lat = {k: stats(v) for k, v in ab.items()}
    for k, st in lat.items():
        print(f"  one send to bob, {k:16s}  p50 {st['p50'] * 1e3:.2f} ms  p99 {st['p99'] * 1e3:.2f} ms")
    emit_result(
        "shim_memory",
        [
            figure("shim RSS, bare interpreter", bare, "MB"),
            figure("shim RSS idle", idle, "MB", baseline=bare, baseline_name="bare interpreter"),
            figure("shim RSS, one bound agent", bound, "MB", baseline=bare, baseline_name="bare interpreter"),
            figure(
                f"shim RSS after {n} sent + {n} received",
                at_n,
                "MB",
                baseline=bare,
                baseline_name="bare interpreter",
                target=f"<= {TARGET_MB:.0f} MB",
                passed=at_n <= TARGET_MB,
                summary=f"bound {bound:.1f} MB, idle {idle:.1f} MB",
            ),
            figure(
                f"shim RSS after {2 * n} sent + {2 * n} received",
                last,
                "MB",
                baseline=bare,
                baseline_name="bare interpreter",
                target=f"<= {TARGET_MB:.0f} MB",
                passed=last <= TARGET_MB,
                summary=" → ".join(f"{mb:.1f}" for _, mb in curve),
            ),
            figure(f"shim RSS growth, rounds 0 → {n} (window filling)", fill, "MB"),
            figure(
                f"shim RSS growth, rounds {n} → {2 * n}",
                flat,
                "MB",
                target=f"<= {FLAT_MB:.0f} MB" if window else None,
                passed=(flat <= FLAT_MB) if window else None,
                summary="" if window else f"INFO: {n} rounds do not fill the {MAX_SETTLED}-message window",
            ),
            versus(
                "send as a task frame on the socket, p50",
                lat["task frame"]["p50"],
                lat["A2A SendMessage"]["p50"],
                "ms",
                "A2A SendMessage p50, same agents, interleaved",
            ),
            figure(
                "shim RSS once an A2A client used it",
                b_after,
                "MB",
                baseline=b_before,
                baseline_name="the same shim before",
                ratio=b_after / b_before,
            ),
        ],
        {"curve_mb": curve, "bare_mb": bare, "idle_mb": idle, "hwm_mb": hwm, "a2a_mb": [b_before, b_after]},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
