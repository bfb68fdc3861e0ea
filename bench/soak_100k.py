"""Memory and time stay flat with history: one live fake agent receiving 100,000 messages over its real socket.

    .venv/bin/python bench/soak_100k.py [-n N] [--threads K]

Starts `python -m crosstalk agent run --harness fake --name soak --inbox FILE --json` in a temp CROSSTALK_HOME and
sends N messages (K client threads, each message once, with `crosstalk.ingress.uds_client.deliver`), sampling the
agent's RSS as it goes; then checks the fake inbox (every message injected exactly once), stops the agent, times
its restart (spawn to ready line) and its RSS after it, and times `crosstalk watch --once --json`. The same three
figures are taken for an empty agent first (the baseline). The soak test (tests/integration/soak) runs `soak()`
with the targets asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    FakeAgent,
    emit_result,
    exit_on_sigterm,
    make_tmp,
    print_machine,
    proc_status_kb,
    remove_tmp,
    versus,
)

TEXT = "soak message {i}: the nightly build finished; results are in the usual place, nothing needs you now."
SAMPLES = 10  # RSS samples over the run


def rss_mb(pid: int) -> float:
    return proc_status_kb(pid, "VmRSS")["VmRSS"] / 1024


def journal_size(root: Path, agent_id: str) -> int:
    from crosstalk.registry.paths import StatePaths

    path = StatePaths(root).journal_file(agent_id)
    return path.stat().st_size if path.exists() else 0


def restart(agent: FakeAgent) -> tuple[float, float, float]:
    """Stop the agent, start it again on the same journal: (seconds from spawn to its ready line, RSS MB then, its
    peak RSS MB so far: the replay's)."""
    agent.stop()
    t0 = time.perf_counter()
    agent.start()
    took = time.perf_counter() - t0
    kb = proc_status_kb(agent.pid, "VmRSS", "VmHWM")
    return took, kb["VmRSS"] / 1024, kb["VmHWM"] / 1024


def watch_once(root: Path) -> float:
    env = {**os.environ, "CROSSTALK_HOME": str(root)}
    cmd = [PYTHON, "-m", "crosstalk", "watch", "--once", "--json"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120, check=False)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"watch --once exited {res.returncode}: {res.stderr.decode(errors='replace')[-500:]}")
    json.loads(res.stdout)
    return took


def send_all(agent: FakeAgent, n: int, threads: int, on_progress: Any = None) -> dict[str, int]:
    """Send n distinct messages over `threads` threads; the count of each outcome state."""
    from crosstalk.core.message import new_message
    from crosstalk.ingress.uds_client import deliver
    from crosstalk.registry.credentials import read_key
    from crosstalk.registry.paths import StatePaths

    token = read_key(StatePaths(agent.root).key_path(agent.ready["agent_id"]))
    uds = agent.ready["uds_path"]
    states: dict[str, int] = {}
    lock = threading.Lock()
    counter = iter(range(n))
    errors: list[BaseException] = []

    def worker() -> None:
        i = None
        try:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                out = deliver(uds, token, new_message(agent.name, TEXT.format(i=i), from_="@soak:bench"), timeout=60)
                with lock:
                    states[out.state.value] = states.get(out.state.value, 0) + 1
                    done = sum(states.values())
                if on_progress is not None and done % max(1, n // SAMPLES) == 0:
                    on_progress(done)
        except BaseException as exc:
            exc.add_note(f"sending soak message {i}; {agent_report(agent)}")
            errors.append(exc)

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    deadline = time.monotonic() + max(600.0, n / 20)
    for t in ts:
        t.join(max(0.0, deadline - time.monotonic()))
    if errors:
        raise errors[0]
    if any(t.is_alive() for t in ts):
        raise RuntimeError(f"{n} sends did not finish in time")
    return states


def agent_report(agent: FakeAgent) -> str:
    """Whether the agent still runs, and the end of its stderr: what a failed send is read with (soak() removes
    the temp dir that holds the log)."""
    rc = agent.proc.poll() if agent.proc is not None else None
    log_path = agent.root / f"{agent.name}.stderr"
    tail = log_path.read_text(errors="replace")[-2000:].strip() if log_path.exists() else ""
    return f"the agent {'runs' if rc is None else f'exited with {rc}'}; its stderr ends: {tail or '(empty)'}"


def injections(inbox: Path) -> tuple[int, int]:
    """(distinct messages injected, how many were injected more than once) from the fake's inbox file."""
    seen: dict[str, int] = {}
    with open(inbox, "rb") as f:
        for line in f:
            mid = json.loads(line)["message_id"]
            seen[mid] = seen.get(mid, 0) + 1
    return len(seen), sum(1 for c in seen.values() if c > 1)


def soak(n: int, threads: int, tmp: Path, *, log: Any = print) -> dict[str, Any]:
    """The whole run in `tmp`; every process it starts is stopped before it returns."""
    out: dict[str, Any] = {"n": n, "threads": threads}
    base = FakeAgent(tmp, "empty", inbox=False)
    try:
        base.start()
        out["empty_rss_mb"] = rss_mb(base.pid)
        out["empty_restart_s"], out["empty_restart_rss_mb"], out["empty_restart_peak_mb"] = restart(base)
        out["empty_watch_s"] = watch_once(tmp)
    finally:
        base.stop()
    log(f"empty agent: RSS {out['empty_rss_mb']:.1f} MB, restart {out['empty_restart_s']:.2f} s, "
        f"watch --once {out['empty_watch_s']:.2f} s")  # fmt: skip

    agent = FakeAgent(tmp, "soak", inbox=True)
    try:
        agent.start()
        samples: list[tuple[int, float, int]] = [(0, rss_mb(agent.pid), 0)]

        def progress(done: int) -> None:
            samples.append((done, rss_mb(agent.pid), journal_size(tmp, agent.ready["agent_id"])))
            log(f"  {done:>7} sent: RSS {samples[-1][1]:.1f} MB, journal {samples[-1][2] / 1e6:.1f} MB")

        t0 = time.perf_counter()
        states = send_all(agent, n, threads, progress)
        out["send_s"] = time.perf_counter() - t0
        out["states"] = states
        out["agent_log"] = agent_report(agent)  # what a state other than accepted is read with
        out["rss_samples"] = samples
        out["rss_mb"] = rss_mb(agent.pid)
        out["journal_mb"] = journal_size(tmp, agent.ready["agent_id"]) / 1e6
        assert agent.inbox is not None
        out["injected"], out["injected_twice"] = injections(agent.inbox)
        out["lost"] = n - out["injected"]
        out["live_peak_mb"] = proc_status_kb(agent.pid, "VmHWM")["VmHWM"] / 1024
        out["restart_s"], out["restart_rss_mb"], out["restart_peak_mb"] = restart(agent)
        out["watch_s"] = watch_once(tmp)
    finally:
        agent.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100_000, help="messages (default 100,000)")
    ap.add_argument("--threads", type=int, default=8, help="client threads (default 8)")
    args = ap.parse_args()
    exit_on_sigterm()
    print_machine()
    tmp = make_tmp()
    try:
        r = soak(args.n, args.threads, tmp)
    finally:
        remove_tmp(tmp)
    half = next((s for s in r["rss_samples"] if s[0] >= args.n // 2), r["rss_samples"][-1])
    print(f"\n{args.n} messages over {args.threads} threads in {r['send_s']:.0f} s: {json.dumps(r['states'])}")
    print(f"  injected {r['injected']}, lost {r['lost']}, injected twice {r['injected_twice']}")
    print(f"  RSS: {r['rss_mb']:.1f} MB at the end, {half[1]:.1f} MB at {half[0]} messages "
          f"(empty agent {r['empty_rss_mb']:.1f} MB)")  # fmt: skip
    print(f"  journal: {r['journal_mb']:.1f} MB")
    print(f"  restart: {r['restart_s']:.2f} s to ready, RSS {r['restart_rss_mb']:.1f} MB, peak "
          f"{r['restart_peak_mb']:.1f} MB (live peak {r['live_peak_mb']:.1f} MB; empty agent "
          f"{r['empty_restart_s']:.2f} s, {r['empty_restart_rss_mb']:.1f} MB)")  # fmt: skip
    print(f"  watch --once: {r['watch_s']:.2f} s (empty agent {r['empty_watch_s']:.2f} s)")
    figures = [
        versus("RSS after the run", r["rss_mb"], r["empty_rss_mb"], "MB", "empty agent"),
        versus("restart to ready", r["restart_s"], r["empty_restart_s"], "s", "empty agent", target="< 2 s",
               passed=r["restart_s"] < 2.0),
        versus("watch --once", r["watch_s"], r["empty_watch_s"], "s", "empty agent", target="< 1 s",
               passed=r["watch_s"] < 1.0),
    ]  # fmt: skip
    emit_result("soak_100k", figures, r)
    return 0 if r["lost"] == 0 and r["injected_twice"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
