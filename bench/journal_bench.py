"""Journal group commit: durable appends from W concurrent threads through one Journal, vs unbatched fsync.

    .venv/bin/python bench/journal_bench.py [--quick] [--writers 16,64] [-n TOTAL] [--rounds R]

Each writer thread appends realistic `received` records (~600 bytes encoded) with `journal.append(rec)`, which
returns only once the record is fsynced. The baseline, measured in the same run and the same temp dir under /tmp,
is one thread doing write + fsync per record on a plain file, in chunks run before and after every Journal run; each
Journal run is compared with its two adjacent chunks, and medians over R rounds are reported.
Target: concurrent journal appends >= 4x the unbatched fsync rate. `journal.batches` counts fsync rounds.

Beside it (info, no target): a lone append, as a delivery's one durable write before the harness is, synced with
fsync and with fdatasync, in interleaved blocks on files that grow as the journal does: whether the cheaper call
would shorten the own part on this disk (bench/own_part.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    emit_result,
    exit_on_sigterm,
    figure,
    fsync_loop,
    make_tmp,
    print_machine,
    remove_tmp,
    run_threads,
)

TARGET_RATIO = 4.0
RECORD_BYTES = 600


def make_record() -> dict:
    """A `received` record like the receiver writes, its text sized so the encoded line is about 600 bytes."""
    from crosstalk.core.message import new_message
    from crosstalk.core.sender import Sender, SenderClass
    from crosstalk.journal import records as R
    from crosstalk.journal.codec import encode

    sender = Sender(SenderClass.EXTERNAL, name="@bench:journal")
    bind = R.binding("0123456789abcdef0123456789abcdef", "bench", None)

    def build(text: str) -> dict:
        msg = new_message("bench", text, from_="@bench:journal")
        return R.received(msg, sender, dedupe_key=sender.dedupe_key, transport="uds", bind=bind)

    overhead = len(encode(build("x"))) - 1
    text = ("please rerun the flaky login test " * 20)[: max(1, RECORD_BYTES - overhead)]
    return build(text)


def through_journal(path: Path, record: dict, total: int, writers: int) -> tuple[float, int, float]:
    """(seconds, batches, seconds spent inside fsync) for `total` durable appends over `writers` threads."""
    from crosstalk.journal.writer import FsOps, Journal

    in_fsync = [0.0]
    clock = time.perf_counter

    def timed_fsync(fd: int) -> None:
        t0 = clock()
        os.fsync(fd)
        in_fsync[0] += clock() - t0

    journal, _ = Journal.open(path, path.with_suffix(".lock"), fs=FsOps(fsync=timed_fsync))
    try:
        for _ in range(min(20, total)):  # warm the flusher thread and the file
            journal.append(record)
        before = journal.batches
        in_fsync[0] = 0.0
        wall = run_threads(total, writers, lambda: journal.append(record))
        return wall, journal.batches - before, in_fsync[0]
    finally:
        journal.close()


def lone_sync(tmp: Path, data: bytes, blocks: int = 8, per: int = 50) -> dict[str, float]:
    """p50 seconds of the sync call after one append of `data`, fsync against fdatasync, in alternating blocks of
    `per` on two files that grow (an append-only journal's case: each append changes the size)."""
    fds = {name: os.open(tmp / f"lone-{name}.data", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
           for name in ("fsync", "fdatasync")}  # fmt: skip
    calls = {"fsync": os.fsync, "fdatasync": os.fdatasync}
    samples: dict[str, list[float]] = {"fsync": [], "fdatasync": []}
    clock = time.perf_counter
    try:
        for b in range(blocks):
            for name in ("fsync", "fdatasync") if b % 2 == 0 else ("fdatasync", "fsync"):
                fd, call = fds[name], calls[name]
                for _ in range(per):
                    os.write(fd, data)
                    t0 = clock()
                    call(fd)
                    samples[name].append(clock() - t0)
    finally:
        for fd in fds.values():
            os.close(fd)
    return {name: statistics.median(xs) for name, xs in samples.items()}


def one_round(tmp: Path, r: int, record: dict, data: bytes, total: int, base_n: int, writer_counts: list[int]) -> dict:
    """Unbatched chunks between the Journal runs (1 writer, then each W); each Journal run is compared with the
    unbatched rate of the two chunks either side of it, so disk noise from other processes hits both alike."""
    plain = tmp / f"plain{r}.data"
    chunks = [fsync_loop(plain, data, base_n)]
    single_wall, _, _ = through_journal(tmp / f"r{r}j1.jsonl", record, base_n, 1)
    chunks.append(fsync_loop(plain, data, base_n))
    runs = {}
    for w in writer_counts:
        runs[w] = through_journal(tmp / f"r{r}j{w}.jsonl", record, total, w)
        chunks.append(fsync_loop(plain, data, base_n))

    def around(i: int) -> float:
        return 2 * base_n / (chunks[i] + chunks[i + 1])

    out = {
        "base": len(chunks) * base_n / sum(chunks),
        "single": base_n / single_wall,
        "single_ratio": base_n / single_wall / around(0),
        "w": {},
    }
    for i, (w, (wall, batches, fsync_s)) in enumerate(runs.items(), start=1):
        out["w"][w] = {
            "rate": total / wall,
            "base": around(i),
            "ratio": total / wall / around(i),
            "batches": batches,
            "per_fsync": total / max(1, batches),
            "fsync_us": fsync_s / max(1, batches) * 1e6,
            "busy": fsync_s / wall,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument("--writers", default="16,64", help="comma-separated writer thread counts (default 16,64)")
    ap.add_argument("-n", type=int, default=None, help="records per Journal run (default 4000, quick 2000)")
    ap.add_argument("--baseline-n", type=int, default=None, help="records per unbatched chunk (default 500, quick 300)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds; medians are reported (default 5, quick 1)")
    args = ap.parse_args()
    exit_on_sigterm()
    from crosstalk.journal.codec import encode

    writer_counts = [int(x) for x in args.writers.split(",") if x.strip()]
    total = args.n or (2000 if args.quick else 4000)
    base_n = args.baseline_n or (300 if args.quick else 500)
    rounds = max(1, args.rounds or (1 if args.quick else 5))
    record = make_record()
    data = encode(record)
    print_machine()
    print(
        f"record: {len(data)} bytes encoded; {rounds} round(s), each: unbatched chunks of {base_n} write+fsync "
        f"around every Journal run ({base_n} appends with 1 writer, {total} per writer count)"
    )

    tmp = make_tmp()
    results = []
    try:
        fsync_loop(tmp / "warm.data", data, min(50, base_n))
        for r in range(rounds):
            res = one_round(tmp, r, record, data, total, base_n, writer_counts)
            results.append(res)
            ws = "  ".join(
                f"W={w}: {x['rate']:.0f} ({x['ratio']:.2f}x, {x['per_fsync']:.1f}/fsync)" for w, x in res["w"].items()
            )
            print(f"  round {r + 1}: unbatched {res['base']:.0f} rec/s  1 writer {res['single']:.0f}  {ws}")
        lone = lone_sync(tmp, data)
    finally:
        remove_tmp(tmp)
    print(
        f"  a lone append, then the sync (p50, interleaved): fsync {lone['fsync'] * 1e6:.0f} us, "
        f"fdatasync {lone['fdatasync'] * 1e6:.0f} us ({lone['fdatasync'] / lone['fsync']:.2f}x)"
    )

    med = statistics.median
    base_rate = med(x["base"] for x in results)
    single_rate = med(x["single"] for x in results)
    single_ratio = med(x["single_ratio"] for x in results)
    print(f"\nmedians over {rounds} round(s) (ratios: median of each run against its adjacent unbatched chunks):")
    print(f"  unbatched: 1 thread, write+fsync per record     {base_rate:9.0f} records/s   (baseline)")
    print(f"  Journal, 1 writer thread                        {single_rate:9.0f} records/s   {single_ratio:5.2f}x")
    figures = [
        figure(
            "journal 1 writer",
            single_rate,
            "rec/s",
            baseline=base_rate,
            baseline_name="unbatched fsync",
            ratio=single_ratio,
        ),
    ]
    for w in writer_counts:
        rate = med(x["w"][w]["rate"] for x in results)
        base_w = med(x["w"][w]["base"] for x in results)
        ratio = med(x["w"][w]["ratio"] for x in results)  # the median of per-run ratios to adjacent baselines
        batches = med(x["w"][w]["batches"] for x in results)
        per_fsync = med(x["w"][w]["per_fsync"] for x in results)
        fsync_us = med(x["w"][w]["fsync_us"] for x in results)
        busy = med(x["w"][w]["busy"] for x in results)
        ok = ratio >= TARGET_RATIO
        print(
            f"  Journal, {w:3d} writer threads                    {rate:9.0f} records/s   {ratio:5.2f}x "
            f"(vs {base_w:.0f} adjacent)   "
            f"batches {batches:.0f} ({per_fsync:.1f} records/fsync, {fsync_us:.0f} us/fsync, "
            f"fsync busy {busy:.0%})   target >= {TARGET_RATIO:.0f}x: {'PASS' if ok else 'MISS'}"
        )
        figures.append(
            figure(
                f"journal {w} writers",
                rate,
                "rec/s",
                baseline=base_w,
                baseline_name="adjacent unbatched fsync",
                ratio=ratio,
                target=f">= {TARGET_RATIO:.0f}x unbatched",
                passed=ok,
                summary=f"{rate:.0f} rec/s vs {base_w:.0f} rec/s unbatched, {batches:.0f} batches "
                f"({per_fsync:.1f} rec/fsync, fsync busy {busy:.0%} of wall)",
            )
        )
    figures.append(
        figure(
            "lone append, fdatasync vs fsync p50",
            lone["fdatasync"] * 1e6,
            "us",
            baseline=lone["fsync"] * 1e6,
            baseline_name="fsync",
            ratio=lone["fdatasync"] / lone["fsync"],
            summary="the sync after one append to a growing file (the journal's write before the harness)",
        )
    )
    emit_result("journal", figures, {"record_bytes": len(data), "rounds": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
