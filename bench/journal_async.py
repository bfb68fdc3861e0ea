"""Journal group commit as the agent uses it: concurrent appends from one asyncio event loop (the receiver chain
calls `append_async`), beside an unbatched write+fsync-per-record baseline measured in the same run, interleaved.

    .venv/bin/python bench/journal_async.py [--quick]

bench/journal_bench.py measures the same journal driven by OS threads; there each blocked thread's wake-up costs
GIL hand-offs that cap batching, while the event loop parks any number of appends at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import emit_result, exit_on_sigterm, figure, fsync_loop, make_tmp, print_machine, remove_tmp, verdict
from crosstalk.journal import Journal

RECORD = {"type": "received", "ts": 1.0, "message": {"text": "x" * 520}, "sender": {"class": "verified"}}


def unbatched_rate(path: Path, count: int) -> float:
    return count / fsync_loop(path, (json.dumps(RECORD) + "\n").encode(), count)


async def journal_rate(journal: Journal, writers: int, total: int) -> tuple[float, int]:
    per = max(1, total // writers)

    async def writer() -> None:
        for _ in range(per):
            await journal.append_async(RECORD)

    b0, t0 = journal.batches, time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(writer() for _ in range(writers))), 300)
    return per * writers / (time.perf_counter() - t0), journal.batches - b0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    exit_on_sigterm()
    print_machine()
    total, base_n, rounds = (3000, 1000, 1) if args.quick else (16000, 4000, 3)
    tmp = make_tmp()
    figures = []
    try:
        journal, _ = Journal.open(tmp / "j.jsonl", tmp / "j.lock")
        try:
            for writers in (16, 64):
                ratios, rates, bases, per_fsync = [], [], [], []
                for _ in range(rounds):
                    before = unbatched_rate(tmp / "u.jsonl", base_n)
                    rate, batches = asyncio.run(journal_rate(journal, writers, total))
                    after = unbatched_rate(tmp / "u.jsonl", base_n)
                    base = (before + after) / 2
                    rates.append(rate)
                    bases.append(base)
                    ratios.append(rate / base)
                    per_fsync.append(total / max(1, batches))
                ratio, rate, base = median(ratios), median(rates), median(bases)
                passed = ratio >= 4.0
                print(
                    f"  async, {writers:>2} concurrent appends: {rate:8.0f} rec/s  vs unbatched {base:6.0f} rec/s  "
                    f"{ratio:4.2f}x  ({median(per_fsync):.1f} records/fsync)  "
                    f"target >= 4x: {verdict(passed)}"
                )
                figures.append(
                    figure(
                        f"journal async {writers} appenders",
                        rate,
                        "rec/s",
                        baseline=base,
                        baseline_name="adjacent unbatched fsync",
                        ratio=ratio,
                        target=">= 4x unbatched",
                        passed=passed,
                        summary=f"{rate:.0f} rec/s vs {base:.0f} rec/s unbatched",
                    )
                )
        finally:
            journal.close()
    finally:
        remove_tmp(tmp)
    emit_result("journal_async", figures)


if __name__ == "__main__":
    main()
