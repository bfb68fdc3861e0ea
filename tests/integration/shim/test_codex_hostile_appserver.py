"""Codex discovery against a hostile app-server (tests/support/hostile_appserver.py, a real process on a real unix
socket): one overall deadline per discovery whatever the peer does, a cap on the pages and the thread ids collected,
and a shim that exits at stdin's EOF while a discovery is still running."""

from __future__ import annotations

import asyncio
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
from collections.abc import Iterator
from pathlib import Path

from crosstalk.harness.codex import appserver
from crosstalk.harness.codex.endpoints import control_socket

HOSTILE_APPSERVER = Path(__file__).resolve().parents[2] / "support" / "hostile_appserver.py"
CROSSTALK = str(Path(sys.executable).parent / "crosstalk")
START_TIMEOUT_S = 20.0


class Hostile:
    def __init__(self, root: Path, mode: str) -> None:
        self.root = root
        self.env = {
            **os.environ,
            "CROSSTALK_HOME": str(root / "state"),
            "CODEX_HOME": str(root / "codex"),
            "CLAUDE_CONFIG_DIR": str(root / "claude"),
        }
        self.socket = control_socket(self.env)
        self.socket.parent.mkdir(parents=True)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.server = self.popen([sys.executable, str(HOSTILE_APPSERVER), str(self.socket), mode])
        assert self.server_line(START_TIMEOUT_S) == "ready"

    def popen(self, argv: list[str], **kw: object) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, env=self.env, cwd=self.root, stdout=subprocess.PIPE, **kw)  # type: ignore[call-overload]
        self.procs.append(proc)
        return proc

    def server_line(self, timeout: float) -> str | None:
        """The next line the server printed (a request's method), within timeout."""
        assert self.server.stdout is not None
        fd = self.server.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1)
            if not chunk:
                return None
            buf += chunk
        return buf.decode().strip()

    def wait_for_request(self, method: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while (line := self.server_line(max(0.0, deadline - time.monotonic()))) != method:
            assert line is not None, f"the app-server never received {method}"

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(5)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def hostile(mode: str) -> Iterator[Hostile]:
    h = Hostile(Path(tempfile.mkdtemp(prefix="xh", dir="/tmp")), mode)  # short: AF_UNIX paths fit 107 bytes
    try:
        yield h
    finally:
        h.close()


def test_list_finishes_within_the_discovery_deadline_when_thread_read_is_never_answered() -> None:
    with hostile("silent-reads") as h:
        started = time.monotonic()
        res = subprocess.run([CROSSTALK, "list"], env=h.env, capture_output=True, timeout=30, check=False)
        took = time.monotonic() - started
        assert res.returncode == 0, res.stderr
        assert took < 15, f"crosstalk list took {took:.1f} s"  # 200 unanswered reads once took 600 s


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def test_the_shim_exits_at_eof_while_discovery_waits_on_the_app_server() -> None:
    with hostile("silent-reads") as h:
        shim = h.popen([CROSSTALK, "mcp", "--harness", "codex"], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert shim.stdin is not None
        client = {"name": "codex", "version": "1"}
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
        shim.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        shim.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        call = {"name": "list_agents", "arguments": {}}
        shim.stdin.write(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
        shim.stdin.flush()
        h.wait_for_request("thread/read")  # list_agents' discovery is waiting on an answer that never comes
        shim.stdin.close()
        started = time.monotonic()
        shim.wait(15)  # TimeoutExpired: the shim lived on after EOF
        assert time.monotonic() - started < 10


def test_an_endlessly_paging_thread_list_is_capped_in_pages_ids_and_time() -> None:
    with hostile("endless-pages") as h:

        async def listing() -> list[str]:
            server = await appserver.AppServer.connect(str(h.socket))
            try:
                return await asyncio.wait_for(appserver.loaded_threads(server), 60)
            finally:
                await server.close()

        started = time.monotonic()
        ids = asyncio.run(listing())
        assert time.monotonic() - started < appserver.LIST_DEADLINE_S + 5
        assert 0 < len(ids) <= appserver.MAX_LOADED
