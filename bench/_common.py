"""Shared helpers for the benchmarks: statistics, machine facts, temp dirs, fake agents, result lines.

Every benchmark script prints one `RESULT {json}` line at the end; bench/run_all.py collects those.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
PYTHON = sys.executable  # run the scripts with .venv/bin/python so this is the project's interpreter
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


# ------------------------------------------------------------------ statistics
def percentile(samples, q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty sequence."""
    xs = sorted(samples)
    if not xs:
        raise ValueError("no samples")
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def stats(samples) -> dict[str, float]:
    xs = list(samples)
    return {
        "n": len(xs),
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
        "mean": sum(xs) / len(xs),
        "min": min(xs),
        "max": max(xs),
    }


def us(seconds: float) -> str:
    return f"{seconds * 1e6:8.0f} us"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.1f} ms"


def run_threads(count: int, threads: int, fn) -> float:
    """Call fn() `count` times spread over `threads` threads started together; wall seconds."""
    per = [count // threads + (1 if i < count % threads else 0) for i in range(threads)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads + 1)

    def worker(k: int) -> None:
        barrier.wait()
        try:
            for _ in range(k):
                fn()
        except BaseException as exc:
            errors.append(exc)

    ts = [threading.Thread(target=worker, args=(k,), daemon=True) for k in per]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    deadline = t0 + 300
    for t in ts:
        t.join(max(0.0, deadline - time.perf_counter()))
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    if any(t.is_alive() for t in ts):
        raise RuntimeError(f"{count} calls over {threads} threads did not finish within 300 s")
    return wall


def alternate(rounds: int, *steps: Callable[[], Any], warm: int = 0) -> list[list[Any]]:
    """Call the steps in turn, `warm` rounds thrown away and then `rounds` kept, so drift on a noisy machine hits
    them alike; each step's results, in order."""
    out: list[list[Any]] = [[] for _ in steps]
    for i in range(warm + rounds):
        for acc, step in zip(out, steps, strict=True):
            value = step()
            if i >= warm:
                acc.append(value)
    return out


def fsync_loop(path: Path, data: bytes, n: int) -> float:
    """Seconds for n appends of `data` to `path`, one write + fsync each, in this thread (the unbatched baseline)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            os.write(fd, data)
            os.fsync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


# ------------------------------------------------------------------ fresh processes
def print_bytecode_env() -> None:
    print(f"inherited PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")


def pyc_env(env: dict[str, str], tmp: Path) -> dict[str, str]:
    """`env` with a bytecode cache: no PYTHONDONTWRITEBYTECODE, PYTHONPYCACHEPREFIX in the temp dir `tmp`."""
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(tmp / "pyc")
    return out


def timed_run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60.0) -> float:
    """Wall seconds of one fresh process, spawn to exit (RuntimeError if it fails); env None inherits ours."""
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {res.returncode}: {res.stderr.decode(errors='replace').strip()}")
    return wall


def python_json_runs(code: str, env: dict[str, str], runs: int, *args: str) -> list[Any]:
    """The JSON each of `runs` fresh `python -c code args...` interpreters prints (for self-timed code)."""
    out = []
    for _ in range(runs):
        res = subprocess.run(
            [PYTHON, "-c", code, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=True
        )
        out.append(json.loads(res.stdout))
    return out


def proc_status_kb(pid: int, *keys: str) -> dict[str, int]:
    """kB fields (VmRSS, VmHWM, ...) of /proc/PID/status."""
    fields = {}
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = row.partition(":")
        if key in keys:
            fields[key] = int(value.split()[0])
    return fields


# ------------------------------------------------------------------ machine and process hygiene
def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "tmp_fs": _fs_type("/tmp"),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def _fs_type(path: str) -> str:
    try:
        res = subprocess.run(["df", "--output=fstype", path], capture_output=True, text=True, timeout=5, check=False)
        lines = res.stdout.split()
        return lines[-1] if len(lines) > 1 else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def print_machine() -> None:
    m = machine()
    print(
        f"machine: nproc={m['nproc']} python={m['python']} kernel={m['kernel']} /tmp fs={m['tmp_fs']} "
        f"load(1m)={m['loadavg_1m']}"
    )


def make_tmp() -> Path:
    """A short temp dir under /tmp (AF_UNIX paths are limited to 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="xtb", dir="/tmp"))


def remove_tmp(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so `finally` blocks stop child processes and remove temp dirs. Only the first:
    a second SIGTERM (run_all stopping a bench that was itself sent one) would end the clean-up half done and leave
    a harness behind."""

    def _handler(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _handler)


def stop_process(proc: subprocess.Popen | None, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM one process we started (by its pid), then SIGKILL if it does not exit; close its pipes."""
    if proc is None:
        return
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def read_line(proc: subprocess.Popen, timeout: float) -> bytes:
    """The first stdout line of proc within timeout (RuntimeError if it exits or stays silent)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            if b"\n" in buf:
                return buf.split(b"\n", 1)[0]
        elif proc.poll() is not None:
            break
    raise RuntimeError(f"process {proc.pid} printed no line within {timeout:.0f} s (exit {proc.poll()})")


# ------------------------------------------------------------------ a live fake agent
class FakeAgent:
    """`python -m crosstalk agent run --harness fake --name NAME --json` in state root `root`."""

    def __init__(self, root: Path, name: str = "bench", *, inbox: bool = True) -> None:
        self.root = root
        self.name = name
        self.inbox = root / f"{name}.inbox.jsonl" if inbox else None
        self.env = {**os.environ, "CROSSTALK_HOME": str(root)}
        self.proc: subprocess.Popen | None = None
        self.ready: dict[str, Any] = {}
        self._stderr = None

    def start(self) -> FakeAgent:
        cmd = [PYTHON, "-m", "crosstalk", "agent", "run", "--harness", "fake", "--name", self.name, "--json"]
        if self.inbox is not None:
            cmd += ["--inbox", str(self.inbox)]
        # stderr goes to a file: a pipe nobody reads could fill up and stall the agent mid-benchmark.
        self._stderr = open(self.root / f"{self.name}.stderr", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, env=self.env, cwd=self.root, stdout=subprocess.PIPE, stderr=self._stderr)
        try:
            self.ready = json.loads(read_line(self.proc, START_TIMEOUT_S))
        except RuntimeError:
            self.stop()
            err = (self.root / f"{self.name}.stderr").read_text(errors="replace").strip()
            raise RuntimeError(f"agent {self.name} did not start: {err or 'no ready line'}") from None
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        stop_process(self.proc)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> FakeAgent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------ results
TIME_UNITS = {"us": 1e6, "ms": 1e3}  # per second


def figure(
    name: str,
    value: float,
    unit: str,
    *,
    baseline: float | None = None,
    baseline_name: str = "",
    ratio: float | None = None,
    target: str | None = None,
    passed: bool | None = None,
    summary: str = "",
) -> dict[str, Any]:
    """One reported number. `target` is the issue's target as text (e.g. "<= 10x"); None marks info only."""
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "baseline": baseline,
        "baseline_name": baseline_name,
        "ratio": ratio,
        "target": target,
        "passed": passed,
        "summary": summary,
    }


def versus(name: str, value: float, baseline: float, unit: str, baseline_name: str, **kw: Any) -> dict[str, Any]:
    """A figure beside its same-run baseline, with ratio value / baseline. For unit "us" or "ms" both are given in
    seconds and reported in that unit; any other unit is reported as given. `kw`: target, passed, summary."""
    scale = TIME_UNITS.get(unit, 1.0)
    return figure(
        name, value * scale, unit, baseline=baseline * scale, baseline_name=baseline_name, ratio=value / baseline, **kw
    )


def emit_result(bench: str, figures: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
    payload = {"bench": bench, "machine": machine(), "figures": figures, **(extra or {})}
    print("RESULT " + json.dumps(payload), flush=True)


def verdict(passed: bool | None) -> str:
    return "INFO" if passed is None else ("PASS" if passed else "MISS")
