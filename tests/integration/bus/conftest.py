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

The wiring itself lives in tests/support/bus_machines.py (new_machine, init_bare_remote, join_two, remote_git, run_cli,
clean_env, GIT_TIMEOUT), which tests, helpers and the e2e bus fixtures import directly.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.bus_machines import Machine, TwoMachines, clean_env, init_bare_remote, join_two, new_machine


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
    return init_bare_remote(xt_tmp / "remote.git")


@pytest.fixture
def make_machine(xt_tmp: Path) -> Callable[[str], Machine]:
    return lambda alias: new_machine(xt_tmp, alias, clean_env())


@pytest.fixture
def two_machines(bare_remote: Path, make_machine: Callable[[str], Machine]) -> TwoMachines:
    return join_two(make_machine("m1"), make_machine("m2"), bare_remote)
