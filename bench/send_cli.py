"""Wall time of one `crosstalk send NAME TEXT` from a wheel install beside a bare start of the same interpreter.

    .venv/bin/python bench/send_cli.py [--quick] [-n RUNS] [--before REF]

Builds a wheel of this checkout (`pip wheel --no-deps`), installs it into a fresh venv in a temp dir (`python -m venv
--without-pip`, then this venv's pip with `--no-deps --no-index`: nothing is downloaded) and byte-compiles it
(`python -m compileall`), as `pip install` of a release leaves it. The wheel's dependencies are not installed:
the venv reads them from this venv's site-packages through a `.pth` line placed after its own site-packages, so
`crosstalk` itself comes from the wheel (checked) and the run works offline; `crosstalk send` to a live agent needs
none of them anyway (tests/integration/cli/test_cli_send_lean.py). Building the wheel needs hatchling: installed here
it is used as is (`--no-build-isolation`), else pip fetches it as configured (an index, a wheel cache, find-links).

Then starts a live fake agent in a temp CROSSTALK_HOME and alternates `<wheel venv>/bin/python -c pass` and
`<wheel venv>/bin/crosstalk send bench TEXT` (each a fresh process, timed from spawn to exit; 3 warm-up rounds),
and reports median and p90 of both and the ratio of medians. Target: send median <= 2x the bare start.
The editable install's figure (`.venv/bin/crosstalk send`, whose imports go through the editable finder) is shown
as INFO beside the same baseline. `--before REF` also builds and installs a wheel of the git ref REF (`git archive`)
and times it in the same alternation, so the figure is shown before and after a change in one run. Last, `python -X
importtime` of each wheel's `crosstalk send`: the 12 largest cumulative imports and the total.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import sysconfig
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import (
    PYTHON,
    REPO,
    FakeAgent,
    alternate,
    emit_result,
    exit_on_sigterm,
    make_tmp,
    ms,
    print_bytecode_env,
    print_machine,
    remove_tmp,
    stats,
    timed_run,
    versus,
)

TARGET_RATIO = 2.0
TEXT = "build 481 failed: test_login timed out"
IMPORT_RE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")
BUILD_TIMEOUT_S = 300.0


def _run(cmd: list[str], what: str, **kw: object) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False, **kw)
    if res.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}")
    return res


def build_wheel(source: Path, out: Path) -> Path:
    """A wheel of the project at `source`, built into `out`."""
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("hatchling") else []
    _run([PYTHON, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(out), str(source)], "pip wheel")
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in {out}, found {[w.name for w in wheels]}")
    return wheels[0]


def install_wheel(wheel: Path, venv: Path) -> Path:
    """A fresh venv at `venv` holding `wheel`, byte-compiled, with this venv's site-packages after its own (for the
    dependencies); its python."""
    _run([PYTHON, "-m", "venv", "--without-pip", str(venv)], "python -m venv")
    py = venv / "bin" / "python"
    _run(
        [PYTHON, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        "pip install",
    )
    site = Path(
        _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], "venv paths").stdout.strip()
    )
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "_crosstalk_bench_deps.pth").write_text("".join(f"{p}\n" for p in ours))
    _run([str(py), "-m", "compileall", "-q", str(site / "crosstalk")], "compileall")
    where = _run([str(py), "-c", "import crosstalk; print(crosstalk.__file__)"], "import crosstalk").stdout.strip()
    if not where.startswith(str(site)):
        raise RuntimeError(f"the wheel venv imports crosstalk from {where}, not from its own {site}")
    return py


def wheel_of_ref(ref: str, tmp: Path) -> Path:
    """A wheel of the git ref `ref` of this checkout (its tree, exported with git archive)."""
    src = tmp / f"src-{re.sub(r'[^A-Za-z0-9._-]', '_', ref)}"
    src.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref], capture_output=True, timeout=60, check=False
    )
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {ref} failed: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, timeout=60, check=True)
    return build_wheel(src, tmp / f"wheel-{src.name}")


def importtime(cmd: list[str], env: dict[str, str]) -> list[tuple[int, int, int, str]]:
    """(cumulative us, self us, depth, module) for each import `-X importtime` reports."""
    res = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)
    rows = []
    for line in res.stderr.decode(errors="replace").splitlines():
        m = IMPORT_RE.match(line)
        if m:
            rows.append((int(m.group(2)), int(m.group(1)), len(m.group(3)) // 2, m.group(4)))
    return rows


def print_imports(label: str, rows: list[tuple[int, int, int, str]], bare: list[tuple[int, int, int, str]]) -> dict:
    total = sum(c for c, _s, depth, _m in rows if depth == 0)
    total_bare = sum(c for c, _s, depth, _m in bare if depth == 0)
    top = sorted(rows, reverse=True)[:12]
    print(f"\n  -X importtime, {label}: {len(rows)} modules, top-level imports {total / 1000:.1f} ms "
          f"(python -c pass: {len(bare)} modules, {total_bare / 1000:.1f} ms); the 12 largest cumulative:")  # fmt: skip
    print(f"    {'cumulative':>10}  {'self':>8}  module")
    for cum, self_us, depth, mod in top:
        print(f"    {cum / 1000:7.1f} ms  {self_us / 1000:5.1f} ms  {'  ' * depth}{mod}")
    return {"modules": len(rows), "total_us": total, "top": [{"module": m, "cumulative_us": c} for c, _s, _d, m in top]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run (20 of each instead of 40)")
    ap.add_argument("-n", type=int, default=None, help="runs of each command (default 40, quick 20; at least 20)")
    ap.add_argument(
        "--before", metavar="REF", help="also time a wheel of this git ref (e.g. the commit before a change)"
    )
    args = ap.parse_args()
    exit_on_sigterm()
    n = max(20, args.n or (20 if args.quick else 40))
    print_machine()
    print_bytecode_env()

    tmp = make_tmp()
    agent = None
    try:
        print("building and installing the wheel(s) ...", flush=True)
        wheel_py = install_wheel(build_wheel(REPO, tmp / "wheel"), tmp / "venv")
        before_py = install_wheel(wheel_of_ref(args.before, tmp), tmp / "venv-before") if args.before else None
        agent = FakeAgent(tmp, "bench", inbox=True).start()
        env = {k: v for k, v in agent.env.items() if k != "PYTHONPYCACHEPREFIX"}  # read the compiled wheel's pycs
        argv = ["send", "bench", TEXT, "--from", "@bench:cli"]
        commands = {
            "bare": [str(wheel_py), "-c", "pass"],
            "wheel": [str(wheel_py.with_name("crosstalk")), *argv],
            "editable": [str(Path(PYTHON).with_name("crosstalk")), *argv],
        }
        if before_py is not None:
            commands["before"] = [str(before_py.with_name("crosstalk")), *argv]
        # 3 warm-up rounds warm the page cache; then every command once per round, in turn.
        runs = dict(
            zip(commands, alternate(n, *(partial(timed_run, c, env) for c in commands.values()), warm=3), strict=True)
        )
        imports = {"wheel": importtime([str(wheel_py), "-X", "importtime", commands["wheel"][0], *argv], env)}
        if before_py is not None:
            imports["before"] = importtime([str(before_py), "-X", "importtime", commands["before"][0], *argv], env)
        imports_bare = importtime([str(wheel_py), "-X", "importtime", "-c", "pass"], env)
        inbox_lines = agent.inbox.read_bytes().count(b"\n") if agent.inbox and agent.inbox.exists() else 0
    finally:
        if agent is not None:
            agent.stop()
        remove_tmp(tmp)

    s = {k: stats(v) for k, v in runs.items()}
    b = s["bare"]
    names = {
        "wheel": "crosstalk send (wheel)",
        "before": f"crosstalk send (wheel of {args.before})",
        "editable": "crosstalk send (editable, INFO)",
    }
    print(f"\n{n} runs each, alternating, after 3 warm-up runs of each; a live fake agent in a temp CROSSTALK_HOME")
    print(f"  {'<wheel venv>/bin/python -c pass':<40} median {ms(b['p50'])}  p90 {ms(b['p90'])}")
    for key in ("before", "wheel", "editable"):
        if key in s:
            r = s[key]
            print(f"  {names[key]:<40} median {ms(r['p50'])}  p90 {ms(r['p90'])}   "
                  f"ratio median {r['p50'] / b['p50']:.2f}x  p90 {r['p90'] / b['p90']:.2f}x")  # fmt: skip
    ratio = s["wheel"]["p50"] / b["p50"]
    ok = ratio <= TARGET_RATIO
    print(f"  target: wheel send median <= {TARGET_RATIO:.1f}x bare start -> {'PASS' if ok else 'MISS'} ({ratio:.2f}x)")
    top = {}
    if "before" in imports:
        top["before"] = print_imports(f"wheel of {args.before} (before)", imports["before"], imports_bare)
    top["wheel"] = print_imports("wheel of this checkout", imports["wheel"], imports_bare)

    figures = [
        versus("crosstalk send median [wheel]", s["wheel"]["p50"], b["p50"], "ms", "python -c pass median",
               target=f"<= {TARGET_RATIO:.0f}x bare start", passed=ok,
               summary=f"send median {s['wheel']['p50'] * 1e3:.1f} ms vs bare start {b['p50'] * 1e3:.1f} ms"),
        versus("crosstalk send p90 [wheel]", s["wheel"]["p90"], b["p90"], "ms", "python -c pass p90"),
        versus("crosstalk send median [editable]", s["editable"]["p50"], b["p50"], "ms", "python -c pass median"),
    ]  # fmt: skip
    if "before" in s:
        figures.append(
            versus(
                f"crosstalk send median [wheel {args.before}]",
                s["before"]["p50"],
                b["p50"],
                "ms",
                "python -c pass median",
            )
        )
    sends = (len(commands) - 1) * (3 + n) + len(imports)
    print(f"\nthe agent's fake inbox holds {inbox_lines} lines ({sends} sends)")
    emit_result("send_cli", figures, {"runs": n, "before": args.before, "imports": top})
    return 0 if inbox_lines == sends else 1


if __name__ == "__main__":
    sys.exit(main())
