"""One harness CLI run one-shot against its mock model server (the e2e fixtures in tests/e2e/conftest.py build them):
its argv, its environment, and a bounded run that leaves no child behind."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from crosstalk.demo.models import ScriptedModelServer

RUN_TIMEOUT = 120.0


def run_bounded(
    argv: list[str], env: dict[str, str], cwd: Path, stdin: str | None = None, timeout: float = RUN_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Runs argv in its own process group with stdin closed (or fed `stdin`), and kills the whole group on a
    timeout and after exit, so no harness child outlives the test."""
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        text=True,
        start_new_session=True,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"{argv[0]} timed out after {timeout}s; stderr tail:\n{err[-2000:]}") from None
    finally:
        _kill_group(proc.pid)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class HarnessRun:
    """How to run one harness one-shot against its mock: `argv_prefix + [prompt]` (the prompt is the final
    positional argument) with exactly `env`, in `cwd`. Without a prompt argument, all three read it from stdin.

    claude and codex prefixes end in `--`, so a prompt starting with "-" is not taken for an option (without it
    `claude -p "-v ..."` prints its version and exits 0). pi has no `--`: it rejects a leading "-" as an unknown
    option and reads a leading "@" as a file to include, so such a prompt must go on stdin (`argv_unsafe_starts`)."""

    name: str
    argv_prefix: list[str]
    env: dict[str, str]
    mock: ScriptedModelServer
    cwd: Path
    home: Path
    argv_unsafe_starts: tuple[str, ...] = ()

    def prompt_fits_argv(self, prompt: str) -> bool:
        return not prompt.startswith(self.argv_unsafe_starts)

    def run(
        self, prompt: str | None = None, *, stdin: str | None = None, timeout: float = RUN_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        # Keep stdin closed when the prompt is an argument: all three CLIs also read a piped stdin and merge it
        # into the prompt (codex appends a <stdin> block, claude appends it, pi prepends it).
        argv = [*self.argv_prefix, *([] if prompt is None else [prompt])]
        return run_bounded(argv, self.env, self.cwd, stdin=stdin, timeout=timeout)
