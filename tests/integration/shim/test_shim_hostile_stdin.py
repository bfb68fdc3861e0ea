"""The real `crosstalk mcp --harness fake` (a private CROSSTALK_HOME) fed hostile lines on stdin: each gets one
JSON-RPC error or tool error naming the problem, and the process keeps serving (a later tools/list is answered)."""

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(60)

CROSSTALK = str(Path(sys.executable).parent / "crosstalk")
READ_S = 15.0
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}},
}
META = {"crosstalk/session": "hostile-1", "crosstalk/name": "mallory"}


class Mcp:
    def __init__(self, root: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "CROSSTALK_FAKE_ANSWER"}
        env.update(CROSSTALK_HOME=str(root / "h"), CROSSTALK_FAKE_INBOX_DIR=str(root / "in"))
        env.update(CLAUDE_CONFIG_DIR=str(root / "claude"), CODEX_HOME=str(root / "codex"))
        (root / "proj").mkdir()
        self.proc = subprocess.Popen(
            [CROSSTALK, "mcp", "--harness", "fake"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=str(root / "proj"),
        )
        self.buf = b""

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj: Any) -> None:
        self.write(json.dumps(obj).encode() + b"\n")

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + READ_S
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"no answer within {READ_S} s (so far {self.buf[:300]!r})"
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 65536)
                assert chunk, f"crosstalk mcp closed stdout (exit {self.proc.poll()}); so far {self.buf[:300]!r}"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def initialize(self) -> None:
        self.send(INIT)
        assert self.read()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def tools_list_answers(self, rid: int) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "method": "tools/list"})
        answer = self.read()
        assert answer["id"] == rid and answer["result"]["tools"], answer
        assert self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@pytest.fixture
def mcp() -> Iterator[Mcp]:
    root = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))  # short: AF_UNIX socket paths live under it
    shim = Mcp(root)
    try:
        shim.initialize()
        yield shim
    finally:
        shim.stop()
        shutil.rmtree(root, ignore_errors=True)


def call_line(rid: int, arguments_json: str) -> bytes:
    head = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "send_message", "_meta": META}}
    return json.dumps(head)[:-2].encode() + b', "arguments": ' + arguments_json.encode() + b"}}\n"


def test_a_line_nesting_1000_levels_is_a_parse_error_and_the_server_lives_on(mcp: Mcp) -> None:
    line = call_line(1, '{"to": "x", "text": "y", "z": ' + "[" * 1000 + "]" * 1000 + "}")
    assert len(line) < 2400  # about 2 KB
    mcp.write(line)
    answer = mcp.read()
    assert answer["id"] is None and answer["error"]["code"] == -32700, answer
    assert "nested deeper than" in answer["error"]["message"]
    mcp.tools_list_answers(2)


def test_a_lone_surrogate_in_the_text_is_invalid_arguments_naming_the_field(mcp: Mcp) -> None:
    for rid, tool in ((3, "send_message"), (4, "ask")):
        line = call_line(rid, '{"to": "mallory", "text": "hi \\ud800 there"}').replace(b"send_message", tool.encode())
        mcp.write(line)
        answer = mcp.read()
        assert answer["id"] == rid, answer
        data = answer["result"]["structuredContent"]
        assert answer["result"]["isError"] and data["state"] == "invalid_arguments", data
        assert "text" in data["reason"] and "surrogate" in data["reason"], data
    mcp.tools_list_answers(5)


def test_a_lone_surrogate_in_the_identifying_meta_is_invalid_arguments(mcp: Mcp) -> None:
    for rid, tool, arguments in ((6, "list_agents", {}), (7, "send_message", {"to": "x", "text": "y"})):
        meta = {"crosstalk/session": "s-\ud800", "crosstalk/name": "n"}
        params = {"name": tool, "arguments": arguments, "_meta": meta}
        mcp.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
        answer = mcp.read()
        data = answer["result"]["structuredContent"]
        assert answer["id"] == rid and data["state"] == "invalid_arguments", data
        assert data["reason"].startswith("_meta") and "surrogate" in data["reason"], data
    mcp.tools_list_answers(8)
