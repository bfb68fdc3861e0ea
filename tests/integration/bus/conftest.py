"""Shared fixtures for the git-bus integration tests: real git, a bare remote, and "machines" that differ only in
their CROSSTALK_HOME and CROSSTALK_ALIAS (so two of them on one host behave like two hosts).

Fixtures (all temp dirs are short, under /tmp, and removed afterwards):
  xt_tmp          Path   a fresh short temp dir (tempfile.mkdtemp(prefix="xt", dir="/tmp")); `tmp` is the same dir.
  bare_remote     Path   an empty bare repository (initial branch main) inside xt_tmp: the shared remote.
  make_machine    callable(alias: str) -> Machine: a machine with its own CROSSTALK_HOME (xt_tmp/<alias>/home),
                         HOME, an empty git config (no user.name, like a fresh host), CROSSTALK_ALIAS=alias and
                         USER=op-<alias>. Machine.cli(*args, input=None, cwd=None, env=None, timeout=60) runs
                         `[sys.executable, "-m", "crosstalk", *args]` and returns subprocess.CompletedProcess (text);
                         Machine.git(*args, cwd=None) runs git with the machine's env and returns stdout.
  two_machines    TwoMachines(a, b, remote, channel): machine "m1" ran `transport init bus --remote <bare>` into
                         xt_tmp/m1/bus and `channel create general`; machine "m2" cloned the remote into
                         xt_tmp/m2/bus. a.root / b.root are the work trees; channel is the uuid of "general".

Helpers importable by tests in this directory: run_cli(args, *, env, cwd, input=None, timeout=60), clean_env(),
GIT_TIMEOUT.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bus_machines import GIT_TIMEOUT, Machine, TwoMachines, clean_env, run_cli  # noqa: F401 (re-exported)


@pytest.fixture
def xt_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tmp(xt_tmp: Path) -> Path:
    """The same short temp dir as xt_tmp, under the name the runner and interrupt tests use."""
    return xt_tmp


@pytest.fixture
def bare_remote(xt_tmp: Path) -> Path:
    remote = xt_tmp / "remote.git"
    subprocess.run(
        ["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)],
        check=True,
        timeout=GIT_TIMEOUT,
        env=clean_env(),
        capture_output=True,
    )
    return remote


@pytest.fixture
def make_machine(xt_tmp: Path) -> Callable[[str], Machine]:
    def make(alias: str) -> Machine:
        base = xt_tmp / alias
        base.mkdir()
        gitconfig = base / "gitconfig"
        gitconfig.write_text("")  # no user.name: the runtime must bring its own identity
        env = clean_env()
        env.update(
            CROSSTALK_HOME=str(base / "home"),
            CROSSTALK_ALIAS=alias,
            HOME=str(base),
            USER=f"op-{alias}",
            GIT_CONFIG_GLOBAL=str(gitconfig),
            GIT_CONFIG_NOSYSTEM="1",
        )
        return Machine(alias, base, env)

    return make


@pytest.fixture
def two_machines(bare_remote: Path, make_machine: Callable[[str], Machine]) -> TwoMachines:
    a, b = make_machine("m1"), make_machine("m2")
    res = a.cli("transport", "init", "bus", "--dir", str(a.base / "bus"), "--remote", str(bare_remote))
    assert res.returncode == 0, res.stderr
    a.root = Path(res.stdout.strip())
    res = b.cli("transport", "clone", str(bare_remote), "--dir", str(b.base / "bus"))
    assert res.returncode == 0, res.stderr
    b.root = Path(res.stdout.strip())
    res = a.cli("channel", "create", "general")
    assert res.returncode == 0, res.stderr
    channel = res.stdout.strip()
    b.git("pull", "-q")
    return TwoMachines(a, b, bare_remote, channel)
