"""Run every benchmark and print one summary line per figure, with its same-run baseline, target and PASS/MISS.

    .venv/bin/python bench/run_all.py [--quick] [--only NAME,...] [--strict]

Each benchmark runs as its own process (its output is shown as it runs); its last `RESULT {json}` line is collected.
Then the lean-path figures in one table (bench/_lean_paths.py): each beside its same-run baseline and its target,
with PASS/MISS, or NOT RUN when its benchmark was not in this run.
Exit status: 1 if a benchmark failed to run (or, with --strict, if a target was missed), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import PYTHON, exit_on_sigterm, machine, stop_process, verdict
from _lean_paths import table as lean_paths_table

BENCH_DIR = Path(__file__).resolve().parent
BENCHMARKS = (
    "floor",
    "delivery",
    "a2a_bench",
    "journal_bench",
    "journal_async",
    "send_cli",
    "shim_startup",
    "shim_tools",
    "shim_memory",
    "bus_roundtrip",
    "bus_tick",
    "claude_delivery",
    "codex_delivery",
    "pi_delivery",
    "own_part",
    "own_steps",
    "claude_inject",
    "adapters_inject",
    "qwen_delivery",
    "gemini_delivery",
    "opencode_delivery",
    "many_agents",
    "relay_live",
    "bus_relay_wake",
    "relay_tools",
    "relay_presence",
)
TIMEOUT_S = {"quick": 180.0, "full": 900.0}
BENCH_STOP_TIMEOUT_S = 30.0


def run_one(name: str, quick: bool) -> tuple[int, dict | None, float]:
    """Run bench/<name>.py, echo its output live; (exit code, RESULT payload or None, seconds)."""
    cmd = [PYTHON, str(BENCH_DIR / f"{name}.py"), *(["--quick"] if quick else [])]
    print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
    timeout = TIMEOUT_S["quick" if quick else "full"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    result = None
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            buf = b""
            while True:
                left = timeout - (time.monotonic() - t0)
                if left <= 0:
                    print(f"=== {name}: timed out after {timeout:.0f} s", flush=True)
                    return 124, None, time.monotonic() - t0
                if not sel.select(min(left, 1.0)):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace")
                    if line.startswith("RESULT "):
                        result = json.loads(line[len("RESULT ") :])
                    else:
                        print(line, flush=True)
        rc = proc.wait(30)
    finally:
        stop_process(proc, BENCH_STOP_TIMEOUT_S)  # SIGTERM: the benchmark stops its own children, removes its dirs
    return rc, result, time.monotonic() - t0


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "x":
        return f"{value:.2f}x"
    if unit in ("us", "ms"):
        return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"
    if unit == "MB":  # memory growth is a fraction of a MB
        return f"{value:.2f} MB" if abs(value) < 10 else f"{value:.1f} MB"
    return f"{value:.0f} {unit}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    exit_on_sigterm()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(unknown)}")

    m = machine()
    rows: list[tuple[str, dict]] = []
    failed: list[str] = []
    for name in names:
        rc, result, secs = run_one(name, args.quick)
        print(f"=== {name}: exit {rc} in {secs:.1f} s", flush=True)
        if rc != 0 or result is None:
            failed.append(f"{name} (exit {rc})")
        for fig in (result or {}).get("figures", []):
            rows.append((result["bench"], fig))

    print(
        f"\nSUMMARY ({'quick' if args.quick else 'full'} run; nproc={m['nproc']} python={m['python']} "
        f"kernel={m['kernel']} load(1m) at start={m['loadavg_1m']})"
    )
    print(f"{'bench':<13} {'figure':<40} {'value':>12} {'baseline':>12} {'ratio':>7}  {'target':<20} verdict")
    missed = 0
    for bench, f in rows:
        ratio = f"{f['ratio']:.2f}x" if f.get("ratio") is not None else "-"
        base_unit = f["unit"]
        print(
            f"{bench:<13} {f['name']:<40} {fmt(f['value'], f['unit']):>12} "
            f"{fmt(f.get('baseline'), base_unit):>12} {ratio:>7}  {f.get('target') or '':<20} "
            f"{verdict(f.get('passed'))}"
        )
        if f.get("passed") is False:
            missed += 1
    targets = [f for _b, f in rows if f.get("passed") is not None]
    tail = f"; failed to run: {', '.join(failed)}" if failed else ""
    print(f"\n{len(targets) - missed}/{len(targets)} targets met{tail}")
    lines, checked, met = lean_paths_table(rows, fmt)
    print("\n".join(lines))
    missed += checked - met
    if failed:
        return 1
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
