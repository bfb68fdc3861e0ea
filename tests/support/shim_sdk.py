"""Helpers for the shim protocol tests: serve shim_router's tools as `crosstalk mcp` serves its own, under the
official SDK client, or as a raw subprocess speaking JSON lines; every process is killed by pid in a finally."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHIM = [sys.executable, str(HERE / "shim_router.py")]  # crosstalk.cli.mcp_cmd.serve with the test router


def shim_env(marks: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env["XT_SHIM_DIR"] = str(marks)
    return env


def kill_pid_file(marks: Path) -> None:
    """Kill the shim whose router wrote marks/pid, if it is still running."""
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int((marks / "pid").read_text()), signal.SIGKILL)


@contextlib.asynccontextmanager
async def sdk_session(marks: Path, *args: str, client_name: str = "codex-sim") -> AsyncIterator[Any]:
    """A ClientSession of the official mcp SDK, initialized, over `crosstalk mcp` as a subprocess."""
    from mcp import ClientSession, StdioServerParameters, stdio_client, types

    params = StdioServerParameters(command=SHIM[0], args=[*SHIM[1:], *args], env=shim_env(marks), cwd=str(HERE))
    try:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, client_info=types.Implementation(name=client_name, version="9.9")) as s,
        ):
            s.init_result = await s.initialize()
            yield s
    finally:
        kill_pid_file(marks)


class RawShim:
    """The test router's MCP server as a subprocess: write JSON lines, read JSON lines with a timeout."""

    def __init__(self, marks: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*SHIM, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=shim_env(marks),
            cwd=str(HERE),
        )
        self.buf = b""
        self.raw_lines: list[bytes] = []

    def send(self, obj: Any) -> None:
        line = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        answer = self.read()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def read(self, timeout: float = 10.0) -> Any:
        """The next JSON line on stdout (AssertionError on timeout or EOF)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"no line from the shim within {timeout} s (so far {self.buf!r})"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                assert chunk, f"shim closed stdout (so far {self.buf!r})"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        self.raw_lines.append(line)
        return json.loads(line)

    def quiet(self, seconds: float) -> bool:
        """True if nothing arrives on stdout for `seconds`."""
        assert self.proc.stdout is not None
        if self.buf:
            return False
        ready, _, _ = select.select([self.proc.stdout.fileno()], [], [], seconds)
        return not ready

    def finish(self, timeout: float = 15.0) -> tuple[bytes, int, bytes]:
        """Close stdin (EOF) and wait for the exit: (the rest of stdout, exit code, stderr)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.stdin = None
        out, err = self.proc.communicate(timeout=timeout)
        return self.buf + out, self.proc.returncode, err

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@contextlib.contextmanager
def raw_shim(marks: Path, *args: str) -> Iterator[RawShim]:
    shim = RawShim(marks, *args)
    try:
        yield shim
    finally:
        shim.stop()
