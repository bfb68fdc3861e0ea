"""The machines of the bus tests: a machine is a CROSSTALK_HOME, an alias and a git config, so two on one host
behave like two hosts. Imported by tests/integration/bus/conftest.py (the fixtures), by tests and helpers directly,
and by the e2e bus wiring (tests.support.bus_harness)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
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

    @property
    def state_dir(self) -> Path:
        """The dispatcher's state (cursor, heartbeat, log, pid file, wake socket) for the transport named "bus"."""
        return self.home / "bus" / "state" / "bus"

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


def new_machine(tmp: Path, alias: str, base_env: Mapping[str, str]) -> Machine:
    """A machine under tmp/alias: base_env plus its own CROSSTALK_HOME (tmp/alias/home), HOME, CROSSTALK_ALIAS=alias,
    USER=op-<alias> and an empty git config (no user.name, like a fresh host: the runtime must bring its own)."""
    base = tmp / alias
    base.mkdir()
    gitconfig = base / "gitconfig"
    gitconfig.write_text("")
    env = {
        **base_env,
        "CROSSTALK_HOME": str(base / "home"),
        "CROSSTALK_ALIAS": alias,
        "HOME": str(base),
        "USER": f"op-{alias}",
        "GIT_CONFIG_GLOBAL": str(gitconfig),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return Machine(alias, base, env)


def remote_git(remote: Path, *args: str) -> str:
    """`git --git-dir REMOTE ARGS...` on a bare repository, without any steering variables; its stdout."""
    return subprocess.run(
        ["git", "--git-dir", str(remote), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT,
        env=clean_env(),
        check=True,
    ).stdout


def init_bare_remote(path: Path) -> Path:
    """An empty bare repository at path (initial branch main): the shared remote."""
    subprocess.run(
        ["git", "init", "-q", "--bare", "--initial-branch=main", str(path)],
        check=True,
        timeout=GIT_TIMEOUT,
        env=clean_env(),
        capture_output=True,
    )
    return path


def init_and_clone(a: Machine, b: Machine, remote: Path, *init_args: str) -> None:
    """a runs `transport init bus --remote REMOTE [INIT_ARGS]` into a.base/bus; b clones the remote into b.base/bus."""
    res = a.cli("transport", "init", "bus", "--dir", str(a.base / "bus"), "--remote", str(remote), *init_args)
    assert res.returncode == 0, res.stderr
    a.root = Path(res.stdout.strip())
    res = b.cli("transport", "clone", str(remote), "--dir", str(b.base / "bus"))
    assert res.returncode == 0, res.stderr
    b.root = Path(res.stdout.strip())


def join_two(a: Machine, b: Machine, remote: Path) -> TwoMachines:
    """init_and_clone; then a runs `channel create general` and b pulls it (so b's dispatcher cursor starts at the
    commit before the channel)."""
    init_and_clone(a, b, remote)
    res = a.cli("channel", "create", "general")
    assert res.returncode == 0, res.stderr
    b.git("pull", "-q")
    return TwoMachines(a, b, remote, res.stdout.strip())
