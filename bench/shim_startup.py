"""`crosstalk mcp` start-up (spawn -> `initialize` answered) and idle memory, beside a bare interpreter start.

    .venv/bin/python bench/shim_startup.py [--quick] [-n RUNS]

Alternates `.venv/bin/python -c pass` (spawn to exit), `.venv/bin/crosstalk mcp` and `python -m crosstalk mcp`
(spawn, write `initialize` at once, time until the answer line arrives), each a fresh process, in a temp
CROSSTALK_HOME, and reports medians and the ratio to the bare start. Target: median <= 15x the bare start.
Two environments: the inherited one ("as-is") and one with a bytecode cache ("pyc").

Then: resident memory (VmRSS) of an idle shim after initialize + tools/list (target <= 60 MB), beside a bare
interpreter's; and the same two figures for a minimal server built on the official `mcp` SDK (MCPServer, one tool),
with the import cost of the SDK's server side against crosstalk.shim.protocol, each in a fresh interpreter. The SDK
rows are skipped when `mcp` is not installed (it is a dev dependency only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    alternate,
    emit_result,
    exit_on_sigterm,
    make_tmp,
    ms,
    print_bytecode_env,
    print_machine,
    proc_status_kb,
    pyc_env,
    python_json_runs,
    read_line,
    remove_tmp,
    stats,
    stop_process,
    timed_run,
    versus,
)

TARGET_RATIO = 15.0
TARGET_RSS_MB = 60.0
CROSSTALK = str(Path(PYTHON).parent / "crosstalk")
INIT = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    )
    + "\n"
).encode()
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
TOOLS_LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'

SDK_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer(name="sdk-bench", version="0")


@server.tool()
def echo(text: str) -> str:
    """Echo."""
    return text


server.run()
'''
IMPORT_OURS = (
    "import time; t = time.perf_counter(); import asyncio, crosstalk.cli.main, crosstalk.cli.mcp_cmd, "
    "crosstalk.shim.protocol; print(time.perf_counter() - t)"
)
IMPORT_SDK = (
    "import time; t = time.perf_counter(); import mcp.server.mcpserver, mcp.server.stdio; "
    "print(time.perf_counter() - t)"
)


def have_sdk() -> bool:
    return subprocess.run([PYTHON, "-c", "import mcp"], capture_output=True, timeout=60, check=False).returncode == 0


def bare(env: dict[str, str]) -> float:
    return timed_run([PYTHON, "-c", "pass"], env)


def spawn(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def to_initialize(cmd: list[str], env: dict[str, str]) -> float:
    """Spawn, write initialize at once, seconds until the answer line arrives."""
    proc = None
    try:
        t0 = time.perf_counter()
        proc = spawn(cmd, env)
        assert proc.stdin is not None
        proc.stdin.write(INIT)
        proc.stdin.flush()
        line = read_line(proc, 60)
        elapsed = time.perf_counter() - t0
        answer = json.loads(line)
        if "result" not in answer:
            raise RuntimeError(f"{cmd}: no initialize result: {line[:200]!r}")
        proc.stdin.close()
        proc.stdin = None
        proc.wait(15)
        return elapsed
    finally:
        stop_process(proc)


def idle_rss_kb(cmd: list[str] | None, env: dict[str, str]) -> dict[str, int]:
    """VmRSS/VmHWM (kB) of a server idle after initialize + tools/list, or of a bare sleeping interpreter."""
    proc = None
    try:
        if cmd is None:
            proc = spawn([PYTHON, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"], env)
            read_line(proc, 30)
        else:
            proc = spawn(cmd, env)
            assert proc.stdin is not None
            proc.stdin.write(INIT)
            proc.stdin.flush()
            read_line(proc, 60)
            proc.stdin.write(INITIALIZED + TOOLS_LIST)
            proc.stdin.flush()
            read_line(proc, 60)  # the tools/list answer
        time.sleep(0.5)
        return proc_status_kb(proc.pid, "VmRSS", "VmHWM")
    finally:
        stop_process(proc)


def import_seconds(code: str, env: dict[str, str], runs: int) -> float:
    return statistics.median(python_json_runs(code, env, runs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run (20 of each, 5 SDK runs)")
    ap.add_argument("-n", type=int, default=None, help="runs of each command (default 30, quick 20; at least 20)")
    args = ap.parse_args()
    exit_on_sigterm()
    n = max(20, args.n or (20 if args.quick else 30))
    sdk_runs = 5 if args.quick else 10
    print_machine()
    print_bytecode_env()

    tmp = make_tmp()
    figures = []
    extra: dict = {}
    try:
        env = {**os.environ, "CROSSTALK_HOME": str(tmp / "home")}
        env_pyc = pyc_env(env, tmp)
        script = [CROSSTALK, "mcp"]
        module = [PYTHON, "-m", "crosstalk", "mcp"]
        from crosstalk.shim.tools import build_router

        router = type(build_router("auto")).__name__
        print(f"router served: {router}")
        extra["router"] = router

        for label, e in (("as-is", env), ("pyc", env_pyc)):
            # 3 warm-up rounds (for pyc, they fill the cache)
            b, s, m = alternate(
                n, partial(bare, e), partial(to_initialize, script, e), partial(to_initialize, module, e), warm=3
            )
            sb, ss, sm = stats(b), stats(s), stats(m)
            print(f"\n[{label}] {n} runs each, alternating, after 3 warm-up runs of each")
            print(f"  python -c pass                        median {ms(sb['p50'])}  p90 {ms(sb['p90'])}")
            for name, st in (("crosstalk mcp", ss), ("python -m crosstalk mcp", sm)):
                ratio = st["p50"] / sb["p50"]
                verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
                print(
                    f"  {name + ' -> initialize':<37} median {ms(st['p50'])}  p90 {ms(st['p90'])}   "
                    f"{ratio:.1f}x bare ({verdict}, target <= {TARGET_RATIO:.0f}x)"
                )
                figures.append(
                    versus(
                        f"{name} -> initialize median [{label}]",
                        st["p50"],
                        sb["p50"],
                        "ms",
                        "python -c pass median",
                        target=f"<= {TARGET_RATIO:.0f}x bare start",
                        passed=ratio <= TARGET_RATIO,
                        summary=f"{name}: initialize answered {st['p50'] * 1e3:.1f} ms after spawn",
                    )
                )
            extra[label] = {"bare": sb, "crosstalk_mcp": ss, "python_m": sm}

        # What the protocol layer alone costs: the same server (mcp_cmd.serve) with a router that has no tools, from
        # a script, so without the command line's argument parsing either.
        no_tools = [PYTHON, str(Path(__file__).resolve().parent / "mcp_no_tools.py")]
        b, p = alternate(n, partial(bare, env_pyc), partial(to_initialize, no_tools, env_pyc), warm=1)
        sb, sp = stats(b), stats(p)
        added = extra["pyc"]["crosstalk_mcp"]["p50"] - sp["p50"]
        print(
            f"\n[pyc] protocol only (router with no tools): median {ms(sp['p50'])}, {sp['p50'] / sb['p50']:.1f}x bare "
            f"{ms(sb['p50']).strip()}; the tools' router adds {ms(added).strip()}"
        )
        figures.append(
            versus(
                "crosstalk mcp, no tools -> initialize [pyc]",
                sp["p50"],
                sb["p50"],
                "ms",
                "python -c pass median",
                summary="the protocol layer alone (bench/mcp_no_tools.py)",
            )
        )
        extra["protocol_only"] = {"bare": sb, "shim": sp}

        rss = [idle_rss_kb(script, env_pyc) for _ in range(3)]
        rss_bare = [idle_rss_kb(None, env_pyc) for _ in range(3)]
        mb = statistics.median(r["VmRSS"] for r in rss) / 1024
        mb_bare = statistics.median(r["VmRSS"] for r in rss_bare) / 1024
        hwm = statistics.median(r["VmHWM"] for r in rss) / 1024
        print(
            f"\nidle resident memory (VmRSS after initialize + tools/list, median of 3): {mb:.1f} MB (peak {hwm:.1f})"
        )
        print(f"  bare interpreter waiting on stdin: {mb_bare:.1f} MB; target <= {TARGET_RSS_MB:.0f} MB")
        figures.append(
            versus(
                "idle crosstalk mcp VmRSS",
                mb,
                mb_bare,
                "MB",
                "bare interpreter VmRSS",
                target=f"<= {TARGET_RSS_MB:.0f} MB",
                passed=mb <= TARGET_RSS_MB,
                summary=f"idle shim {mb:.1f} MB vs bare interpreter {mb_bare:.1f} MB",
            )
        )
        extra["rss_kb"] = {"shim": rss, "bare": rss_bare}

        ours_import = import_seconds(IMPORT_OURS, env_pyc, sdk_runs)
        print(
            f"\nimport asyncio + crosstalk.cli.main + mcp_cmd + shim.protocol (fresh process, median of {sdk_runs}): "
            f"{ms(ours_import)}"
        )
        extra["import_ours_s"] = ours_import
        if have_sdk():
            sdk_script = tmp / "sdk_server.py"
            sdk_script.write_text(SDK_SERVER)
            sdk_cmd = [PYTHON, str(sdk_script)]
            sdk_import = import_seconds(IMPORT_SDK, env_pyc, sdk_runs)
            to_initialize(sdk_cmd, env_pyc)  # warm-up
            sdk_init = [to_initialize(sdk_cmd, env_pyc) for _ in range(sdk_runs)]
            ours_pyc = extra["pyc"]["crosstalk_mcp"]["p50"]
            sdk_p50 = statistics.median(sdk_init)
            sdk_rss = statistics.median(idle_rss_kb(sdk_cmd, env_pyc)["VmRSS"] for _ in range(2)) / 1024
            print(
                f"import mcp.server.mcpserver + mcp.server.stdio (same):                             {ms(sdk_import)}"
            )
            print(
                f"minimal MCPServer (official SDK) -> initialize median of {sdk_runs} [pyc]: {ms(sdk_p50)} "
                f"({sdk_p50 / ours_pyc:.1f}x crosstalk mcp's {ms(ours_pyc).strip()}); idle VmRSS {sdk_rss:.1f} MB"
            )
            figures.append(
                versus(
                    "SDK MCPServer -> initialize median [pyc]",
                    sdk_p50,
                    ours_pyc,
                    "ms",
                    "crosstalk mcp median [pyc]",
                    summary="the same handshake served by the official SDK (for the choice in docs/dev/mcp-shim.md)",
                )
            )
            figures.append(
                versus(
                    "import SDK server vs shim.protocol", sdk_import, ours_import, "ms", "import crosstalk shim path"
                )
            )
            figures.append(versus("idle SDK MCPServer VmRSS", sdk_rss, mb, "MB", "idle crosstalk mcp VmRSS"))
            extra["sdk"] = {"import_s": sdk_import, "initialize": stats(sdk_init), "rss_mb": sdk_rss}
        else:
            print("mcp SDK not installed: SDK comparison skipped")
    finally:
        remove_tmp(tmp)

    emit_result("shim", figures, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
