"""One idle dispatcher tick on a transport holding 1k messages versus one holding 100k, beside git's own floor.

    .venv/bin/python bench/bus_tick.py [--quick] [-m TICKS]

Builds two transports with bus_fixture.build_transport (1,000 and 100,000 messages; --quick: 1,000 and 20,000),
each a bare remote on loopback (a local path) plus a checked-out clone registered in a temp CROSSTALK_HOME. For each,
constructs crosstalk.bus.dispatch.dispatcher.Dispatcher in-process and runs a first tick with the cursor removed, which
scans the whole tree once (reported as info: what a dispatcher with no cursor pays — an unregistered transport, or lost
state; a machine that joined with `transport clone` starts at the commit it joined at instead), then times M idle
ticks (default 30). The transports have a remote, so every
idle tick fetches. The two transports' ticks are interleaved (1k, 100k, 1k, ... with the order flipped every round)
so machine noise hits both alike. Target (docs/performance.md): median idle tick at 100k <= 1.2x the median at 1k.

Baselines in the same run, interleaved with the ticks: a `git rev-parse HEAD` subprocess and a `git fetch` of the
unchanged remote, in each repository; the fetch also with --no-recurse-submodules, which spares git reading the index
(the submodule check reads all of it, 16 MB at 100k files). A per-git-command breakdown of the idle tick (every git
subprocess the tick runs, timed by wrapping GitRepo._raw) shows what the tick spends its time on at each size.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    emit_result,
    exit_on_sigterm,
    figure,
    make_tmp,
    ms,
    print_machine,
    remove_tmp,
    stats,
    timed_run,
    versus,
)
from bus_fixture import GitTimer, build_transport

TARGET_RATIO = 1.2


def timed_git(root: Path, *args: str) -> float:
    """Wall seconds of one `git -C root ARGS` subprocess (RuntimeError if it fails)."""
    return timed_run(["git", "-C", str(root), *args], timeout=120)


class Side:
    """One transport under test: its Dispatcher, git timer and samples."""

    def __init__(self, label: str, count: int, root: Path, env: dict[str, str]) -> None:
        from crosstalk.bus.dispatch.dispatcher import Dispatcher
        from crosstalk.bus.dispatch.eventlog import EventLog
        from crosstalk.bus.transport.transports import resolve_transport

        self.label, self.count, self.root = label, count, root
        transport = resolve_transport(root, str(root), environ=env)
        self.dispatcher = Dispatcher(transport, environ=env, log=EventLog(transport.state(env).ensure().log))
        self.timer = GitTimer(self.dispatcher.repo)
        self.ticks: list[float] = []
        self.revparse: list[float] = []
        self.fetch: list[float] = []
        self.fetch_nosub: list[float] = []
        self.first_tick_s = 0.0
        self.first_added = 0

    def first_tick(self) -> None:
        # No cursor: the full scan a dispatcher pays when it has none (the clone's join cursor would skip it).
        self.dispatcher.state.cursor.unlink(missing_ok=True)
        t0 = time.perf_counter()
        report = self.dispatcher.tick()
        self.first_tick_s = time.perf_counter() - t0
        self.first_added = report.added
        if report.head is None or report.incomplete:
            raise RuntimeError(f"first tick on the {self.label} transport did not complete: {report}")

    def idle_tick(self) -> None:
        self.timer.active = True
        t0 = time.perf_counter()
        report = self.dispatcher.tick()
        wall = time.perf_counter() - t0
        self.timer.active = False
        if not report.idle:
            raise RuntimeError(f"tick on the {self.label} transport was not idle: {report}")
        self.ticks.append(wall)

    def clear_samples(self) -> None:
        for samples in (self.ticks, self.revparse, self.fetch, self.fetch_nosub):
            samples.clear()
        self.timer.samples.clear()

    def baselines(self) -> None:
        self.revparse.append(timed_git(self.root, "rev-parse", "HEAD"))
        self.fetch.append(timed_git(self.root, "fetch", "-q", "origin"))
        # Without the submodule check, fetch never reads the index (16 MB at 100k files): git's O(1) fetch.
        self.fetch_nosub.append(timed_git(self.root, "fetch", "-q", "--no-recurse-submodules", "origin"))


def breakdown_rows(sides: list[Side], ticks: int) -> list[str]:
    keys = sorted({k for s in sides for k in s.timer.samples}, key=lambda k: -sum(sides[-1].timer.samples.get(k, [])))
    rows = []
    for key in keys:
        cells = []
        for s in sides:
            xs = s.timer.samples.get(key, [])
            per_tick = sum(xs) / ticks
            cells.append(f"{len(xs) / ticks:4.1f} x {ms(stats(xs)['p50']) if xs else '      -':>10} = {ms(per_tick)}")
        rows.append(f"    git {key:<22} " + "   ".join(cells))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 vs 20,000 messages")
    ap.add_argument("-m", "--ticks", type=int, default=30, help="idle ticks per transport (default 30)")
    args = ap.parse_args()
    exit_on_sigterm()
    small, big = 1000, 20_000 if args.quick else 100_000
    print_machine()
    print(f"bus_tick: idle dispatcher tick, {small:,} vs {big:,} messages, {args.ticks} ticks each, interleaved")
    tmp = make_tmp()
    try:
        home = tmp / "home"
        env = dict(os.environ, CROSSTALK_HOME=str(home))
        # The in-process dispatcher and anything it calls (wake(), state paths) must see the temp state root too.
        os.environ["CROSSTALK_HOME"] = str(home)
        sides = []
        for count in (small, big):
            t0 = time.perf_counter()
            _remote, clone = build_transport(tmp, f"t{count}", count, env)
            print(f"  built the {count:,}-message transport (fast-import + clone) in {time.perf_counter() - t0:.1f} s")
            sides.append(Side(f"{count // 1000}k", count, clone, env))
        for s in sides:
            s.first_tick()
            print(f"  first tick {s.label}: {s.first_tick_s:.2f} s (full scan of {s.first_added:,} added files)")
        for s in sides:  # warm the page cache and git's own caches before timing
            s.idle_tick()
            s.baselines()
        for s in sides:
            s.clear_samples()
        for i in range(args.ticks):
            order = sides if i % 2 == 0 else sides[::-1]
            for s in order:
                s.idle_tick()
            for s in order:
                s.baselines()
        rows = breakdown_rows(sides, args.ticks)
    finally:
        remove_tmp(tmp)

    a, b = sides
    ta, tb = stats(a.ticks), stats(b.ticks)
    ra, rb = stats(a.revparse), stats(b.revparse)
    fa, fb = stats(a.fetch), stats(b.fetch)
    na, nb = stats(a.fetch_nosub), stats(b.fetch_nosub)
    ratio = tb["p50"] / ta["p50"]
    passed = ratio <= TARGET_RATIO
    print(f"  {'':<34} {a.label + f' ({a.count:,})':>22} {b.label + f' ({b.count:,})':>22}")
    for name, x, y in (
        ("idle tick p50", ta["p50"], tb["p50"]),
        ("idle tick p90", ta["p90"], tb["p90"]),
        ("baseline: git rev-parse HEAD p50", ra["p50"], rb["p50"]),
        ("baseline: git fetch (unchanged) p50", fa["p50"], fb["p50"]),
        ("  same, --no-recurse-submodules p50", na["p50"], nb["p50"]),
        ("first tick (full scan), info", a.first_tick_s, b.first_tick_s),
    ):
        print(f"  {name:<34} {ms(x):>22} {ms(y):>22}")
    print(f"  idle tick {b.label}/{a.label} = {ratio:.2f}x (target <= {TARGET_RATIO}x): {'PASS' if passed else 'MISS'}")
    print(
        f"  fetch {b.label}/{a.label} = {fb['p50'] / fa['p50']:.2f}x "
        f"(--no-recurse-submodules: {nb['p50'] / na['p50']:.2f}x); "
        f"idle tick / fetch: {a.label} {ta['p50'] / fa['p50']:.2f}x, {b.label} {tb['p50'] / fb['p50']:.2f}x"
    )
    print(f"  git subprocesses per idle tick (calls x p50 = ms per tick):   {a.label:<30}{b.label}")
    for row in rows:
        print(row)
    floor_a = ra["p50"] + fa["p50"]
    floor_b = rb["p50"] + fb["p50"]
    emit_result(
        "bus_tick",
        [
            figure(
                f"idle tick {b.label} / {a.label} (p50)",
                ratio,
                "x",
                baseline=(fb["p50"] / fa["p50"]),
                baseline_name=f"git fetch {b.label}/{a.label}",
                target=f"<= {TARGET_RATIO}x",
                passed=passed,
                summary=f"{a.label} {ta['p50'] * 1e3:.1f} ms, {b.label} {tb['p50'] * 1e3:.1f} ms",
            ),
            versus(f"idle tick p50 at {a.label}", ta["p50"], floor_a, "ms", "git rev-parse + fetch"),
            versus(f"idle tick p50 at {b.label}", tb["p50"], floor_b, "ms", "git rev-parse + fetch"),
            figure(f"first tick (full scan) at {b.label}", b.first_tick_s * 1e3, "ms"),
        ],
        {
            "messages": [a.count, b.count],
            "ticks": args.ticks,
            "idle_tick_s": {a.label: ta, b.label: tb},
            "git_breakdown_ms_per_tick": {
                s.label: {k: sum(v) * 1e3 / args.ticks for k, v in s.timer.samples.items()} for s in sides
            },
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
