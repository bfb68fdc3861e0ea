"""The machines of the bus integration tests: a machine is a CROSSTALK_HOME, an alias and a git config, so two on
one host behave like two hosts. Imported by conftest.py (the fixtures) and by tests and helpers directly: a module
of its own, because `from conftest import ...` resolves to whichever conftest pytest loaded last."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

GIT_TIMEOUT = 60.0
_SCRUB = ("CROSSTALK_", "GIT_")


def clean_env() -> dict[str, str]:
    """The test process's env without any crosstalk or git steering variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}


def run_cli(
    args: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    input: str | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crosstalk", *args],
        env=env,
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


@dataclass
class Machine:
    alias: str
    base: Path
    env: dict[str, str] = field(default_factory=dict)
    root: Path | None = None  # the work tree of the transport this machine joined, once it did

    @property
    def home(self) -> Path:
        return self.base / "home"

    def cli(
        self,
        *args: str,
        input: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        return run_cli(
            args, env={**self.env, **(env or {})}, cwd=cwd or self.root or self.base, input=input, timeout=timeout
        )

    def git(self, *args: str, cwd: Path | None = None) -> str:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd or self.root or self.base,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
        assert proc.returncode == 0, f"git {args}: {proc.stderr}"
        return proc.stdout


@dataclass
class TwoMachines:
    a: Machine
    b: Machine
    remote: Path
    channel: str
