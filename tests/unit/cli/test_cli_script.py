"""The `crosstalk` command is bin/crosstalk, shipped as a wheel script, not a [project.scripts] entry point: the
launcher pip writes for an entry point imports `re` before crosstalk runs (docs/performance.md, "Lean send path")."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]


def test_the_script_imports_only_sys_and_the_cli() -> None:
    source = (REPO / "bin" / "crosstalk").read_text()
    assert source.startswith("#!python\n")  # the installer rewrites it to its interpreter
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {"sys", "crosstalk.cli.main"}
    assert "script()" in source  # main() with send's quick exit (cli/main.py)


def test_the_wheel_ships_it_and_no_entry_point_of_that_name() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "crosstalk" not in project["project"]["scripts"]
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-scripts"] == {"bin/crosstalk": "crosstalk"}


def _script(prelude: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`crosstalk ARGV` run as bin/crosstalk runs it (cli.main.script), after `prelude`; stdout and stderr are pipes."""
    code = f"import sys\n{prelude}\nsys.argv = ['crosstalk', *sys.argv[1:]]\n"
    code += "from crosstalk.cli.main import script\nscript()"
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


# An object the interpreter's shutdown finalizes (it prints then); a quick exit never shuts down.
FINALIZED = "class D:\n    def __del__(self): print('finalized')\nd = D()"


def test_a_quick_exit_flushes_what_send_wrote_and_keeps_its_code() -> None:
    ok = _script(FINALIZED, "send", "--help")
    assert ok.returncode == 0 and ok.stdout.startswith("usage: crosstalk send") and ok.stderr == ""
    assert "finalized" not in ok.stdout  # the quick exit was taken
    assert _script(FINALIZED, "version").stdout.endswith("finalized\n")  # another command: the usual exit
    bad = _script("", "send", "alice", "hi", "--from", "nobody")
    assert bad.returncode == 2
    assert (
        bad.stdout == ""
        and bad.stderr == "crosstalk: --from 'nobody' must look like @scheme:topic (for example @ci:build)\n"
    )


def test_an_exit_handler_or_a_thread_gets_the_interpreters_own_exit() -> None:
    handler = _script("import atexit; atexit.register(lambda: print('handler ran'))", "send", "--help")
    assert handler.returncode == 0 and handler.stdout.endswith("handler ran\n")
    thread = _script(
        "import threading; t = threading.Timer(0.05, print, ['thread ran']); t.start()", "send", "x", "y", "--from", "z"
    )
    assert thread.returncode == 2 and thread.stdout == "thread ran\n"
