"""Wall time of one `crosstalk send NAME TEXT` (the installed console script) beside a bare interpreter start.

    .venv/bin/python bench/send_cli.py [--quick] [-n RUNS]

Starts a live fake agent in a temp CROSSTALK_HOME, then alternates `.venv/bin/python -c pass` and
`.venv/bin/crosstalk send bench TEXT` (each a fresh process, timed from spawn to exit) and reports median and p90 of
both and the ratio of medians. Target: `crosstalk send` median <= 6x the bare interpreter start.

Two environments are measured: the inherited one ("as-is"), and one with a bytecode cache ("pyc": no
PYTHONDONTWRITEBYTECODE, PYTHONPYCACHEPREFIX in the temp dir), because with PYTHONDONTWRITEBYTECODE=1 and an editable
install every run compiles crosstalk's own modules from source. Then a per-stage import breakdown (wall time in a fresh
process) and `python -X importtime -m crosstalk send ...` once per environment, listing the 10 largest cumulative
imports.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    FakeAgent,
    alternate,
    emit_result,
    exit_on_sigterm,
    make_tmp,
    ms,
    print_bytecode_env,
    print_machine,
    pyc_env,
    python_json_runs,
    remove_tmp,
    stats,
    timed_run,
    versus,
)

TARGET_RATIO = 6.0
TEXT = "build 481 failed: test_login timed out"
IMPORT_RE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")

# Run in a fresh interpreter: wall time of each import stage of the send path, then the send itself.
STAGES = """
import json, sys, time
c = time.perf_counter
t = [c()]
import crosstalk.cli.main
t.append(c())
p = crosstalk.cli.main.build_parser("send")
p.parse_args(["send", "bench", sys.argv[1]])
t.append(c())
import crosstalk.cli.send_cmd
t.append(c())
import crosstalk.ingress.client
t.append(c())
from crosstalk.ingress.client import send
from crosstalk.core.message import new_message
from crosstalk.registry.paths import StatePaths
send(StatePaths.from_env(), new_message("bench", sys.argv[1], from_="@bench:cli"), timeout=10)
t.append(c())
print(json.dumps([b - a for a, b in zip(t, t[1:])]))
"""
STAGE_NAMES = (
    "import crosstalk.cli.main (argparse)",
    "build parser + parse argv",
    "+ crosstalk.cli.send_cmd",
    "+ crosstalk.ingress.client (and deps)",
    "resolve + read key + deliver",
)


def importtime(cmd: list[str], env: dict[str, str]) -> list[tuple[int, int, int, str]]:
    """(cumulative us, self us, depth, module) for each import `-X importtime` reports."""
    res = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)
    rows = []
    for line in res.stderr.decode(errors="replace").splitlines():
        m = IMPORT_RE.match(line)
        if m:
            rows.append((int(m.group(2)), int(m.group(1)), len(m.group(3)) // 2, m.group(4)))
    return rows


def stages(env: dict[str, str], runs: int) -> list[float]:
    """Median wall seconds of each STAGES step over `runs` fresh interpreters."""
    per = python_json_runs(STAGES, env, runs, TEXT)
    return [statistics.median(col) for col in zip(*per, strict=True)]


def measure_env(env: dict[str, str], n: int) -> tuple[list[float], list[float]]:
    bare_cmd = [PYTHON, "-c", "pass"]
    send_cmd = [str(Path(PYTHON).parent / "crosstalk"), "send", "bench", TEXT, "--from", "@bench:cli"]
    # 3 warm-up rounds warm the page cache and, in the pyc environment, fill the bytecode cache.
    bare, send = alternate(n, partial(timed_run, bare_cmd, env), partial(timed_run, send_cmd, env), warm=3)
    return bare, send


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run (20 of each instead of 40)")
    ap.add_argument("-n", type=int, default=None, help="runs of each command (default 40, quick 20; at least 20)")
    args = ap.parse_args()
    exit_on_sigterm()
    n = max(20, args.n or (20 if args.quick else 40))
    stage_runs = 5 if args.quick else 10
    print_machine()
    print_bytecode_env()

    tmp = make_tmp()
    agent = None
    results: dict[str, dict] = {}
    try:
        agent = FakeAgent(tmp, "bench", inbox=True).start()
        env_pyc = pyc_env(agent.env, tmp)
        for label, env in (("as-is", agent.env), ("pyc", env_pyc)):
            bare, send = measure_env(env, n)
            it_cmd = [PYTHON, "-X", "importtime", "-m", "crosstalk", "send", "bench", TEXT, "--from", "@bench:cli"]
            results[label] = {
                "bare": stats(bare),
                "send": stats(send),
                "stages": stages(env, stage_runs),
                "imports": importtime(it_cmd, env),
                "imports_bare": importtime([PYTHON, "-X", "importtime", "-c", "pass"], env),
            }
        inbox_lines = agent.inbox.read_bytes().count(b"\n") if agent.inbox and agent.inbox.exists() else 0
    finally:
        if agent is not None:
            agent.stop()
        remove_tmp(tmp)

    figures = []
    for label, r in results.items():
        b, s = r["bare"], r["send"]
        ratio = s["p50"] / b["p50"]
        ok = ratio <= TARGET_RATIO
        what = (
            "inherited environment"
            if label == "as-is"
            else "bytecode cache on (PYTHONPYCACHEPREFIX, no PYTHONDONTWRITEBYTECODE)"
        )
        print(f"\n[{label}] {what}: {n} runs each, alternating, after 3 warm-up runs of each")
        print(f"  .venv/bin/python -c pass          median {ms(b['p50'])}  p90 {ms(b['p90'])}")
        print(
            f"  .venv/bin/crosstalk send ...      median {ms(s['p50'])}  p90 {ms(s['p90'])}   "
            f"ratio median {ratio:.1f}x  p90 {s['p90'] / b['p90']:.1f}x"
        )
        print(f"  target: send median <= {TARGET_RATIO:.0f}x bare start -> {'PASS' if ok else 'MISS'} ({ratio:.1f}x)")
        print(f"  stages in a fresh interpreter (median of {stage_runs}, wall):")
        for name, sec in zip(STAGE_NAMES, r["stages"], strict=True):
            print(f"    {name:<32} {ms(sec)}")
        top = sorted(r["imports"], reverse=True)[:10]
        total = sum(c for c, _s, depth, _m in r["imports"] if depth == 0)
        total_bare = sum(c for c, _s, depth, _m in r["imports_bare"] if depth == 0)
        print(f"  python -X importtime -m crosstalk send ...: 10 largest cumulative imports [{label}]")
        print(f"    {'cumulative':>10}  {'self':>8}  module")
        for cum, self_us, depth, mod in top:
            print(f"    {cum / 1000:7.1f} ms  {self_us / 1000:5.1f} ms  {'  ' * depth}{mod}")
        print(f"    all top-level imports: {total / 1000:.1f} ms (python -c pass: {total_bare / 1000:.1f} ms)")
        r["top"] = [{"module": m, "cumulative_us": c, "self_us": su} for c, su, _d, m in top]
        figures.append(
            versus(
                f"crosstalk send median [{label}]",
                s["p50"],
                b["p50"],
                "ms",
                "python -c pass median",
                target=f"<= {TARGET_RATIO:.0f}x bare start",
                passed=ok,
                summary=f"send median {s['p50'] * 1e3:.1f} ms vs bare start {b['p50'] * 1e3:.1f} ms",
            )
        )
        figures.append(versus(f"crosstalk send p90 [{label}]", s["p90"], b["p90"], "ms", "python -c pass p90"))
    # Per environment: 3 warm-up + n timed `crosstalk send` runs, stage_runs STAGES runs, one -X importtime run.
    sends = len(results) * (3 + n + stage_runs + 1)
    print(f"\nthe agent's fake inbox holds {inbox_lines} lines ({sends} sends)")
    emit_result(
        "send_cli",
        figures,
        {
            "stages": {label: dict(zip(STAGE_NAMES, r["stages"], strict=True)) for label, r in results.items()},
            "top_imports": {label: r["top"] for label, r in results.items()},
        },
    )
    return 0 if inbox_lines == sends else 1


if __name__ == "__main__":
    sys.exit(main())
