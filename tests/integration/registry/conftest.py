"""Registry integration fixtures: short temp state roots, child processes that are always reaped."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.registry.paths import StatePaths

CHILD = Path(__file__).resolve().parents[2] / "support" / "registry_child.py"
TIMEOUT = 15.0


class Child:
    """A registry_child.py process; kill() is by PID and always reaps it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.pid = self.proc.pid
        assert self.read() == {"ready": True}

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise TimeoutError(f"child {self.pid} said nothing within {timeout}s")
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError(f"child {self.pid} exited (rc={self.proc.poll()})")
        return json.loads(line)

    def ask(self, **cmd: Any) -> dict[str, Any]:
        self.send(**cmd)
        return self.read()

    def kill9(self) -> None:
        """SIGKILL without reaping: the caller may look at the zombie before wait()."""
        os.kill(self.pid, signal.SIGKILL)

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


@pytest.fixture
def spawn() -> Iterator[Any]:
    children: list[Child] = []

    def start() -> Child:
        child = Child()
        children.append(child)
        return child

    try:
        yield start
    finally:
        for child in children:
            child.kill()


@pytest.fixture
def state() -> Iterator[StatePaths]:
    root = Path(tempfile.mkdtemp(prefix="xt"))
    try:
        yield StatePaths(root / "st").ensure()
    finally:
        shutil.rmtree(root, ignore_errors=True)
