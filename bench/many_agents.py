"""Many agents: memory per agent, and how long stopping them all takes — in one shim, and as separate processes.

    .venv/bin/python bench/many_agents.py [-n N] [--processes P] [--quick]

Starts a real `crosstalk mcp --harness fake` in a temp CROSSTALK_HOME, binds N sessions (one `list_agents` call each,
each with its own `crosstalk/session`), reads the shim's RSS, then closes its stdin and times until it exits, and
counts what the closed agents left behind (descriptors, sockets, credentials: nothing should stay). The same run with
one session is the baseline. Per-agent memory is (RSS with N - RSS with 1) / (N - 1).

Then P standalone agents (`crosstalk agent run --harness fake`, one process each): their median RSS, and the time
from SIGTERM to all of them at once until the last exits, beside one agent's.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    FakeAgent,
    emit_result,
    exit_on_sigterm,
    figure,
    make_tmp,
    print_machine,
    proc_status_kb,
    remove_tmp,
    stop_process,
    versus,
)

READ_S = 300.0
STOP_S = 120.0


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _answers(proc: subprocess.Popen[bytes], count: int, timeout: float) -> None:
    """Read `count` JSON-RPC answers from the shim, or raise when they do not come within `timeout`."""
    assert proc.stdout is not None
    fd, buf, seen = proc.stdout.fileno(), b"", 0
    deadline = time.monotonic() + timeout
    while seen < count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise RuntimeError(f"{seen} of {count} answers within {timeout:.0f} s")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise RuntimeError("the shim closed stdout")
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                if "result" not in json.loads(line):
                    raise RuntimeError(f"an answer without a result: {line[:200]!r}")
                seen += 1


def run(sessions: int, tmp: Path) -> dict[str, Any]:
    """One shim serving `sessions` sessions: bind seconds, RSS MB, EOF-to-exit seconds, files left behind."""
    from crosstalk.registry.paths import StatePaths

    root = tmp / f"n{sessions}"
    paths = StatePaths(root / "state")
    (root / "inbox").mkdir(parents=True)
    env = {
        **os.environ,
        "CROSSTALK_HOME": str(paths.root),
        "CROSSTALK_FAKE_INBOX_DIR": str(root / "inbox"),
        "CLAUDE_CONFIG_DIR": str(root / "claude"),
        "CODEX_HOME": str(root / "codex"),
    }
    cmd = [PYTHON, "-m", "crosstalk", "mcp", "--harness", "fake"]
    proc = subprocess.Popen(cmd, env=env, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        assert proc.stdin is not None
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
        proc.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        proc.stdin.flush()
        _answers(proc, 1, READ_S)
        t0 = time.perf_counter()
        for i in range(sessions):
            call = {"name": "list_agents", "arguments": {}, "_meta": {"crosstalk/session": f"session-{i}"}}
            proc.stdin.write(_line({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": call}))
        proc.stdin.flush()
        _answers(proc, sessions, READ_S)
        bind_s = time.perf_counter() - t0
        bound = len(list(paths.agents.glob("*.json")))
        rss = proc_status_kb(proc.pid, "VmRSS")["VmRSS"] / 1024
        t0 = time.perf_counter()
        proc.stdin.close()
        proc.wait(STOP_S)
        stop_s = time.perf_counter() - t0
        left = [*paths.agents.glob("*.json"), *paths.sock.iterdir(), *paths.credentials.iterdir()]
        return {"sessions": sessions, "bound": bound, "bind_s": bind_s, "rss_mb": rss, "stop_s": stop_s,
                "left": len(left)}  # fmt: skip
    finally:
        stop_process(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def processes(count: int, tmp: Path) -> dict[str, Any]:
    """`count` standalone fake agents: median RSS MB, seconds from SIGTERM to all until every one has exited."""
    root = tmp / f"p{count}"
    root.mkdir()
    agents = [FakeAgent(root, f"a{i}", inbox=False) for i in range(count)]
    try:
        with ThreadPoolExecutor(4) as pool:  # starting is not what is measured: overlap it (2 at a time per core)
            list(pool.map(FakeAgent.start, agents))
        rss = statistics.median(proc_status_kb(a.pid, "VmRSS")["VmRSS"] / 1024 for a in agents)
        t0 = time.perf_counter()
        for a in agents:
            assert a.proc is not None
            a.proc.terminate()
        waiters = [threading.Thread(target=a.proc.wait, args=(STOP_S,), daemon=True) for a in agents if a.proc]
        for w in waiters:
            w.start()
        for w in waiters:
            w.join(STOP_S)
        stop_s = time.perf_counter() - t0
        running = sum(1 for a in agents if a.proc is not None and a.proc.poll() is None)
        return {"processes": count, "rss_mb": rss, "stop_s": stop_s, "still_running": running}
    finally:
        for a in agents:
            a.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200, help="sessions in the one shim (default 200)")
    ap.add_argument("--processes", type=int, default=200, help="standalone agent processes (default 200)")
    ap.add_argument("--quick", action="store_true", help="50 sessions, 20 processes")
    args = ap.parse_args()
    n, count = (50, 20) if args.quick else (args.n, args.processes)
    exit_on_sigterm()
    print_machine()
    tmp = make_tmp()
    try:
        one = run(1, tmp)
        many = run(n, tmp)
        single = processes(1, tmp)
        fleet = processes(count, tmp)
    finally:
        remove_tmp(tmp)
    per_agent = (many["rss_mb"] - one["rss_mb"]) / max(1, n - 1)
    for r in (one, many):
        print(f"{r['sessions']:>4} sessions: bound {r['bound']} in {r['bind_s']:.2f} s, RSS {r['rss_mb']:.1f} MB, "
              f"stdin EOF to exit {r['stop_s']:.2f} s, files left {r['left']}")  # fmt: skip
    print(f"per bound agent: {per_agent:.2f} MB")
    for r in (single, fleet):
        print(f"{r['processes']:>4} agent processes: median RSS {r['rss_mb']:.1f} MB, SIGTERM to all exited "
              f"{r['stop_s']:.2f} s, still running {r['still_running']}")  # fmt: skip
    figures = [
        versus(f"shim RSS, {n} sessions bound", many["rss_mb"], one["rss_mb"], "MB", "one session"),
        figure("RSS per bound agent", per_agent, "MB"),
        versus(f"EOF to exit, {n} sessions", many["stop_s"], one["stop_s"], "s", "one session"),
        figure("files left by closed agents", many["left"], "files", target="0", passed=many["left"] == 0),
        versus("RSS of one agent process", fleet["rss_mb"], single["rss_mb"], "MB", "a lone agent process"),
        versus(f"SIGTERM to exit, {count} processes", fleet["stop_s"], single["stop_s"], "s", "one process"),
    ]
    emit_result("many_agents", figures, {"one": one, "many": many, "single": single, "fleet": fleet})
    return 0


if __name__ == "__main__":
    sys.exit(main())
