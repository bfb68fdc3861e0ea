"""What a `crosstalk` command imports: run it as the console script does in a fresh interpreter, and list the
modules it loaded that a bare interpreter of the same environment (its site hooks included) does not.

Both probes take their list before they import json to write it, so the probe's own imports never hide the
command's (json brings re, enum, functools and collections with it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

PROBE = """
import sys
out, argv = sys.argv[1], sys.argv[2:]
from crosstalk.cli.main import main
code = 0
try:
    main(argv)
except SystemExit as exc:
    code = exc.code
loaded = sorted(sys.modules)
import json
with open(out, "w") as f:
    json.dump(loaded, f)
sys.exit(code)
"""
BARE = "import sys; loaded = sorted(sys.modules); import json; json.dump(loaded, open(sys.argv[1], 'w'))"


def _run(
    code: str, out: Path, args: tuple[str, ...], env: Mapping[str, str], cwd: Path, timeout: float
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    res = subprocess.run(
        [sys.executable, "-c", code, str(out), *args], env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return res, set(json.loads(out.read_text()))


def command_modules(
    args: tuple[str, ...], *, env: Mapping[str, str], workdir: Path, timeout: float
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`crosstalk ARGS` run in `workdir` with `env`: its result, and the modules it loaded beyond a bare start."""
    n = len(list(workdir.glob("modules.*.json")))
    res, mods = _run(PROBE, workdir / f"modules.{n}.json", args, env, workdir, timeout)
    _, bare = _run(BARE, workdir / f"modules.{n}.bare.json", (), env, workdir, timeout)
    return res, mods - bare


def hits(mods: set[str], forbidden: tuple[str, ...]) -> list[str]:
    """The modules of `mods` that are, or are inside, one of `forbidden`."""
    return sorted(m for m in mods if any(m == f or m.startswith(f + ".") for f in forbidden))
