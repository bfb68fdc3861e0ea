"""Resident memory of a session's crosstalk: the `crosstalk mcp` shim with one bound agent that sends and receives.

    .venv/bin/python bench/shim_memory.py [--quick] [-n N]   # 4 x N rounds, default N = 1000

Two `crosstalk mcp --harness fake` processes (shim_tools.RawShim), A binding `alice` and B binding `bob`. VmRSS of
shim A (from /proc/PID/status) is read idle (after initialize + tools/list), bound (after its first bound call), and
after every quarter of N rounds; each round alice sends bob one message and bob sends alice one (N sent and N
received by each agent), and every 50th round is an ask from alice that bob answers with `reply` (the reply
travels back into alice's session). Every send must be `accepted` (asks `submitted`), and each inbox must hold every
message. Beside it, in the same run: a bare interpreter waiting on stdin, and shim B again after an A2A 1.0 client
(the SDK's, in this process) fetched its agent card and sent it one message: the A2A endpoint loads its stack only
then, and that figure is what every bound shim carried before task frames.

VmRSS of shim A is read every quarter of N rounds, over 4N rounds (default N = 1,000: 1k, 2k, 3k and 4k messages
each way). An agent keeps its newest 1,000 settled messages and tasks whole (journal/window.py MAX_SETTLED), so RSS
rises while that window fills; the journal is compacted every 2 MB of growth (about 900 rounds here), and the first
compaction that lets settled messages go comes after the window is full (about 1,900 rounds). Warm means from 3,000
rounds on: the window is full, that first letting-go compaction has run, and the interpreter's own tables have
reached their working size (its interned-string table doubles once, +0.96 MB in one allocation, between 2,000 and
2,750 rounds: docs/dev/shim-memory.md). From there every 1,000 rounds hold the same work (about one compaction each),
so what RSS still gains is growth with history, not a first fill.

Targets: shim A after every step <= 35 MB; flat once warm: growth per 1,000 rounds over each step from 3k on
<= 1 MB (the largest is the figure; a run that never gets warm, --quick, reports it as INFO). `-n 2000` (8,000
rounds) shows three warm steps.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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
from shim_tools import RawShim, inbox_lines

TARGET_MB = 35.0
FLAT_MB = 1.0
STEPS = 4  # rounds are measured at 1, 2, 3 and 4 times -n (and every quarter of -n between)
WARM = 3000  # rounds after which every step is alike (module docstring)
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
    ap.add_argument("--quick", action="store_true", help=f"a short run ({STEPS} x 250 rounds; never warm)")
    ap.add_argument("-n", type=int, default=None, help=f"rounds per step, {STEPS} steps (default 1000, quick 250)")
    args = ap.parse_args()
    exit_on_sigterm()
    n = args.n or (250 if args.quick else 1000)
    total = STEPS * n
    print_machine()
    print(f"shim_memory: VmRSS of `crosstalk mcp` (alice) over {total} messages sent and {total} received")
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
        for i in range(total):
            one_round(a, b, i)
            if (i + 1) % max(1, n // 4) == 0:
                curve.append((i + 1, rss_mb(a)))
        elapsed = time.perf_counter() - t0
        to_bob, to_alice = inbox_lines(tmp, "bob"), inbox_lines(tmp, "alice")
        asks = total // ASK_EVERY
        if to_bob != total or to_alice != total + asks:  # alice also got one reply per ask
            raise RuntimeError(f"inboxes hold {to_bob} (bob) and {to_alice} (alice); expected {total} and more")
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
    steps = [(k * n, at[k * n]) for k in range(1, STEPS + 1)]
    # Growth per 1,000 messages over each step once warm (module docstring): the largest is the figure.
    per_k = [((s0, s1), (m1 - m0) * 1000 / n) for (s0, m0), (s1, m1) in itertools.pairwise(steps)]
    warm = [(span, g) for span, g in per_k if span[0] >= WARM]
    print(f"  bare interpreter                   {bare:6.1f} MB")
    print(f"  shim A idle                        {idle:6.1f} MB")
    print(f"  shim A, alice bound                {bound:6.1f} MB   (shim B, bob bound: {b_bound:.1f} MB)")
    for done, mb in curve[1:]:
        print(f"  shim A after {done:5d} sent + {done:5d} received  {mb:6.1f} MB")
    print(f"  shim A peak (VmHWM)                {hwm:6.1f} MB")
    for (s0, s1), g in per_k:
        tag = f"target <= {FLAT_MB:.0f} MB" if s0 >= WARM else f"INFO: not warm before {WARM} rounds"
        print(f"  growth {s0} → {s1} rounds, per 1,000   {g:+6.2f} MB ({tag})")
    print(f"  shim B before / after one A2A client: {b_before:.1f} → {b_after:.1f} MB (+{b_after - b_before:.1f} MB)")
    print(f"  {4 * total + asks} tool calls in {elapsed:.1f} s")
    lat = {k: stats(v) for k, v in ab.items()}
    for k, st in lat.items():
        print(f"  one send to bob, {k:16s}  p50 {st['p50'] * 1e3:.2f} ms  p99 {st['p99'] * 1e3:.2f} ms")
    rss_figures = [
        figure(
            f"shim RSS after {done} sent + {done} received",
            mb,
            "MB",
            baseline=bare,
            baseline_name="bare interpreter",
            target=f"<= {TARGET_MB:.0f} MB",
            passed=mb <= TARGET_MB,
            summary=f"bound {bound:.1f} MB, idle {idle:.1f} MB" if done == n else "",
        )
        for done, mb in steps
    ]
    worst = max(warm, key=lambda w: w[1]) if warm else None
    emit_result(
        "shim_memory",
        [
            figure("shim RSS, bare interpreter", bare, "MB"),
            figure("shim RSS idle", idle, "MB", baseline=bare, baseline_name="bare interpreter"),
            figure("shim RSS, one bound agent", bound, "MB", baseline=bare, baseline_name="bare interpreter"),
            *rss_figures,
            figure(
                "shim RSS growth per 1000 messages, warm",
                worst[1] if worst else per_k[-1][1],
                "MB",
                baseline=at[worst[0][0]] if worst else None,
                baseline_name=f"RSS at {worst[0][0]} rounds" if worst else "",
                target=f"<= {FLAT_MB:.0f} MB" if worst else None,
                passed=(worst[1] <= FLAT_MB) if worst else None,
                summary=(
                    f"largest of {', '.join(f'{s0}-{s1}: {g:+.2f}' for (s0, s1), g in warm)}"
                    if worst
                    else f"INFO: {total} rounds never warm (warm from {WARM})"
                ),
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
