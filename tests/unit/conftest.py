"""Fixtures shared by the unit tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture
def sleeper() -> Iterator[Callable[..., int]]:
    """start(*args, env=None, ready=...) -> pid: a child that sleeps with `args` on its command line and `env` as
    its environment, returned once `ready(pid)` holds (what /proc shows of it); every one is killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str, env: dict[str, str] | None = None, ready: Callable[[int], object]) -> int:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", *args], env=env)
        started.append(proc)
        deadline = time.monotonic() + 10
        while not ready(proc.pid):
            assert time.monotonic() < deadline, "the child never showed in /proc"
            time.sleep(0.005)
        return proc.pid

    yield start
    for proc in started:
        proc.kill()
        proc.wait(10)
