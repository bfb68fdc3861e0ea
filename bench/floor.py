"""The same-run floor: a bare unix-socket round trip to a separate server process that fsyncs one write.

Importable (`FloorServer`, `round_trip`, `measure`, `measure_throughput`) by the other benchmarks, and a script:

    .venv/bin/python bench/floor.py [--quick] [-n N]

The server is a tiny Python process (comparable to an agent process): it accepts one connection at a time, reads
one line, appends it to a file in its temp dir under /tmp (the same disk as the state root) with write + fsync,
answers one line and closes. The client times connect + write + (server fsync) + answer, the shape of `deliver`.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    START_TIMEOUT_S,
    emit_result,
    exit_on_sigterm,
    figure,
    make_tmp,
    print_machine,
    read_line,
    remove_tmp,
    run_threads,
    stats,
    stop_process,
    us,
    versus,
)

ANSWER = b'{"message_id":"floor","state":"accepted","reason":null}\n'
DEFAULT_PAYLOAD_BYTES = 700  # about the size of an auth line + a crosstalk user line with a short text


# ------------------------------------------------------------------ the server (runs in its own process)
def serve(sock_path: str, data_path: str, do_fsync: bool) -> None:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(256)
    fd = os.open(data_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        conn, _ = srv.accept()
        with conn:
            buf = b""
            while b"\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                buf += chunk
            if not buf:
                continue
            os.write(fd, buf)
            if do_fsync:
                os.fsync(fd)
            conn.sendall(ANSWER)


class FloorServer:
    """The floor server process in a temp dir of its own; `with FloorServer() as f: f.sock_path`."""

    def __init__(self, *, fsync: bool = True, tmp: Path | None = None) -> None:
        self.fsync = fsync
        self._own_tmp = tmp is None
        self.tmp = tmp
        self.proc: subprocess.Popen | None = None
        self.sock_path = ""

    def start(self) -> FloorServer:
        if self.tmp is None:
            self.tmp = make_tmp()
        tag = "f" if self.fsync else "n"
        self.sock_path = str(self.tmp / f"floor{tag}.sock")
        data_path = str(self.tmp / f"floor{tag}.data")
        cmd = [PYTHON, str(Path(__file__).resolve()), "--serve", self.sock_path, data_path]
        if not self.fsync:
            cmd.append("--no-fsync")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            read_line(self.proc, START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None
        if self._own_tmp:
            remove_tmp(self.tmp)
            self.tmp = None

    def __enter__(self) -> FloorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------ the client
def payload_of(size: int = DEFAULT_PAYLOAD_BYTES) -> bytes:
    return b"x" * max(1, size - 1) + b"\n"


def round_trip(sock_path: str, payload: bytes, timeout: float = 10.0) -> None:
    """connect, write, half-close, read the answer line, close: the same socket calls `deliver` makes."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(sock_path)
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        buf = b""
        while b"\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    finally:
        sock.close()
    if not buf.endswith(b"\n"):
        raise RuntimeError("floor server closed without an answer")


def measure(sock_path: str, n: int, payload: bytes | None = None) -> list[float]:
    """n sequential round trips; seconds each."""
    payload = payload or payload_of()
    out: list[float] = []
    clock = time.perf_counter
    for _ in range(n):
        t0 = clock()
        round_trip(sock_path, payload)
        out.append(clock() - t0)
    return out


def measure_throughput(sock_path: str, count: int, threads: int, payload: bytes | None = None) -> float:
    """Round trips per second with `threads` concurrent clients."""
    payload = payload or payload_of()
    wall = run_threads(count, threads, lambda: round_trip(sock_path, payload))
    return count / wall


def measure_fsync(dir_path: Path, n: int, size: int = DEFAULT_PAYLOAD_BYTES) -> list[float]:
    """In-process write + fsync of `size` bytes to a file in dir_path; seconds each."""
    fd = os.open(dir_path / "fsync.data", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    data = b"x" * size
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, data)
            os.fsync(fd)
            out.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
    return out


# ------------------------------------------------------------------ shared with the benchmarks beside the floor
def interleave(blocks: int, *steps: Callable[[], list[float]]) -> list[list[float]]:
    """Run the steps in turn, `blocks` times, so drift on a noisy machine hits them alike; the samples of each step."""
    out: list[list[float]] = [[] for _ in steps]
    for _ in range(blocks):
        for acc, step in zip(out, steps, strict=True):
            acc += step()
    return out


def vs_floor_figures(
    name: str, s: dict, f: dict, *, unit: str = "us", target_ratio: float | None = None, summary: str = ""
) -> list[dict[str, Any]]:
    """The p50 and p99 figures of samples `s` beside the floor's `f` (stats dicts); `name` holds `{q}` for p50/p99.
    With target_ratio, the p50 figure carries the target "<= Nx floor"."""
    target: dict[str, Any] = {}
    if target_ratio is not None:
        target = {"target": f"<= {target_ratio:.0f}x floor", "passed": s["p50"] / f["p50"] <= target_ratio}
    return [
        versus(name.format(q="p50"), s["p50"], f["p50"], unit, "floor p50", summary=summary, **target),
        versus(name.format(q="p99"), s["p99"], f["p99"], unit, "floor p99"),
    ]


def last_block_figure(name: str, block_p50: list[tuple[int, float, float]]) -> dict[str, Any]:
    """The last block's p50 (us) beside the floor's in the same block; block_p50 = [(held, floor p50, p50), ...]."""
    (h0, _f0, s0), (h1, f1, s1) = block_p50[0], block_p50[-1]
    summary = f"first block {s0 * 1e6:.0f} us at {h0} held, last {s1 * 1e6:.0f} us at {h1}"
    return versus(name, s1, f1, "us", "floor p50, last block", summary=summary)


def print_block_p50(block_p50: list[tuple[int, float, float]]) -> None:
    print("    " + "  ".join(f"{h}:{fp * 1e6:.0f}/{sp * 1e6:.0f}" for h, fp, sp in block_p50))


def blocks_extra(block_p50: list[tuple[int, float, float]], key: str) -> list[dict[str, float]]:
    return [{"held": h, "floor_p50_us": fp * 1e6, key: sp * 1e6} for h, fp, sp in block_p50]


# ------------------------------------------------------------------ the script
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument("-n", type=int, default=None, help="round trips per measurement (default 2000, quick 300)")
    ap.add_argument("--serve", nargs=2, metavar=("SOCK", "DATA"), help=argparse.SUPPRESS)
    ap.add_argument("--no-fsync", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], not args.no_fsync)
        return 0

    exit_on_sigterm()
    n = args.n or (300 if args.quick else 2000)
    warm = min(100, n)
    print_machine()
    print(f"floor: {n} sequential round trips each, {DEFAULT_PAYLOAD_BYTES}-byte line, server = separate process")
    tmp = make_tmp()
    try:
        with FloorServer(fsync=True, tmp=tmp) as fs, FloorServer(fsync=False, tmp=tmp) as nf:
            measure(fs.sock_path, warm)
            measure(nf.sock_path, warm)
            measure_fsync(tmp, warm)
            # Interleave the three in blocks so drift on a noisy machine hits them alike.
            blocks = 10
            floor, nofsync, fsync_only = interleave(
                blocks,
                lambda: measure(fs.sock_path, n // blocks),
                lambda: measure(nf.sock_path, n // blocks),
                lambda: measure_fsync(tmp, n // blocks),
            )
            tput = measure_throughput(fs.sock_path, n, 8)
    finally:
        remove_tmp(tmp)
    f, nf_, fo = stats(floor), stats(nofsync), stats(fsync_only)
    print(f"  floor (connect+write+fsync+answer)  p50 {us(f['p50'])}  p99 {us(f['p99'])}")
    print(f"  same without the fsync              p50 {us(nf_['p50'])}  p99 {us(nf_['p99'])}")
    print(f"  write+fsync alone, in-process       p50 {us(fo['p50'])}  p99 {us(fo['p99'])}")
    print(f"  floor throughput, 8 client threads  {tput:8.0f} round trips/s (one fsync each, no batching)")
    summary = (
        f"floor p50 {f['p50'] * 1e6:.0f} us p99 {f['p99'] * 1e6:.0f} us "
        f"(no-fsync round trip p50 {nf_['p50'] * 1e6:.0f} us, fsync alone p50 {fo['p50'] * 1e6:.0f} us)"
    )
    emit_result(
        "floor",
        [
            versus("floor p50", f["p50"], nf_["p50"], "us", "round trip without fsync", summary=summary),
            versus("floor p99", f["p99"], nf_["p99"], "us", "round trip without fsync"),
            figure("fsync alone p50", fo["p50"] * 1e6, "us"),
            figure("floor throughput (8 threads)", tput, "msg/s"),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
