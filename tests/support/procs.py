"""Real-process support for the CLI and crash integration tests.

`Procs` owns one short temporary state root (AF_UNIX paths must fit 107 bytes) and every process a test starts in
it: agents run as `python -m crosstalk agent run --harness fake ... --json`, the CLI as the installed
`.venv/bin/crosstalk`. Every wait has a timeout; `close()` ends each process it started by PID (SIGTERM, wait,
then SIGKILL) and removes the root.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crosstalk.journal.codec import read_journal
from crosstalk.registry.paths import StatePaths

CROSSTALK = Path(sys.executable).with_name("crosstalk")
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0
CLI_TIMEOUT_S = 30.0


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met within {timeout} s")
        time.sleep(0.01)


def read_line(proc: subprocess.Popen[bytes], timeout: float, buf: bytearray | None = None) -> bytes | None:
    """One line from proc.stdout within timeout, without blocking past it; None on EOF or timeout."""
    assert proc.stdout is not None
    buf = bytearray() if buf is None else buf
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        # poll, not select: a long run (the kill -9 suite's 1,000 lives) may hold descriptors past 1024
        poller = select.poll()
        poller.register(proc.stdout.fileno(), select.POLLIN | select.POLLHUP)
        if not poller.poll(int(min(left, 0.1) * 1000)):
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


@dataclass
class Agent:
    name: str
    proc: subprocess.Popen[bytes]
    ready: dict[str, Any]
    inbox: Path
    err_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def agent_id(self) -> str:
        return str(self.ready["agent_id"])

    @property
    def registered_name(self) -> str:
        return str(self.ready["name"])

    def inbox_lines(self) -> list[dict[str, Any]]:
        return inbox_lines(self.inbox)

    def inbox_ids(self) -> list[str]:
        return [line["message_id"] for line in self.inbox_lines()]


def inbox_lines(path: Path) -> list[dict[str, Any]]:
    """The fake session's inbox, whole lines only: a reader may catch a long line the fake is still writing."""
    raw = path.read_bytes() if path.exists() else b""
    return [json.loads(line) for line in raw.split(b"\n")[:-1] if line.strip()]


@dataclass
class Procs:
    root: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def create(cls) -> Procs:
        return cls(Path(tempfile.mkdtemp(prefix="xt", dir="/tmp")))

    @property
    def paths(self) -> StatePaths:
        return StatePaths(self.root)

    @property
    def env(self) -> dict[str, str]:
        # Each harness's config dir too: sessions of the machine's own Claude or Codex never leak into a listing.
        harness_dirs = {"CLAUDE_CONFIG_DIR": str(self.root / "claude"), "CODEX_HOME": str(self.root / "codex")}
        return {**os.environ, "CROSSTALK_HOME": str(self.root), **harness_dirs}

    # ------------------------------------------------------------------ agents
    def agent_cmd(self, name: str, *extra: str, inbox: Path | None = None) -> list[str]:
        inbox = inbox if inbox is not None else self.root / f"{name}.inbox.jsonl"
        return [
            sys.executable,
            "-m",
            "crosstalk",
            "agent",
            "run",
            "--harness",
            "fake",
            "--name",
            name,
            "--inbox",
            str(inbox),
            "--json",
            *extra,
        ]

    def start_agent(self, name: str, *extra: str, inbox: Path | None = None) -> Agent:
        """Start an agent and read its JSON ready line (stderr goes to a file: a full pipe never blocks it)."""
        inbox = inbox if inbox is not None else self.root / f"{name}.inbox.jsonl"
        err_path = self.root / f"{name}.{len(self.procs)}.stderr"
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                self.agent_cmd(name, *extra, inbox=inbox),
                env=self.env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self.procs.append(proc)
        line = read_line(proc, START_TIMEOUT_S)
        if line is None:
            self.stop(proc)
            raise RuntimeError(f"agent {name} did not start: {err_path.read_text().strip() or 'no ready line'}")
        return Agent(name, proc, json.loads(line), inbox, err_path)

    def kill9(self, agent: Agent) -> None:
        """SIGKILL (no clean shutdown: descriptor, socket and key stay behind) and reap."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent.pid, signal.SIGKILL)
        agent.proc.wait(STOP_TIMEOUT_S)
        if agent.proc.stdout is not None:
            agent.proc.stdout.close()  # its pipe: a long run of lives must not pile up descriptors

    # ------------------------------------------------------------------ the CLI
    def cli(
        self,
        *args: str,
        input: str | bytes | None = None,
        timeout: float = CLI_TIMEOUT_S,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        data = input.encode() if isinstance(input, str) else input
        res = subprocess.run(
            [str(CROSSTALK), *args],
            env=env or self.env,
            cwd=self.root,
            input=data,
            stdin=None if data is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        return subprocess.CompletedProcess(res.args, res.returncode, res.stdout.decode(), res.stderr.decode())

    def popen_cli(self, *args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [str(CROSSTALK), *args],
            env=self.env,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.procs.append(proc)
        return proc

    # ------------------------------------------------------------------ journal
    def journal_records(self, agent_id: str) -> list[dict[str, Any]]:
        return read_journal(self.paths.journal_file(agent_id)).records

    # ------------------------------------------------------------------ cleanup
    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(STOP_TIMEOUT_S)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def close(self) -> None:
        try:
            for proc in reversed(self.procs):
                self.stop(proc)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def procs() -> Iterator[Procs]:
    p = Procs.create()
    try:
        yield p
    finally:
        p.close()


def one_error_line(stderr: str) -> str:
    """The CLI's error contract: exactly one line on stderr, starting 'crosstalk: '."""
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {stderr!r}"
    assert lines[0].startswith("crosstalk: "), lines[0]
    return lines[0]
