"""`crosstalk capture` of a shim-hosted agent: a real `crosstalk mcp --harness fake` driven over stdio with real
JSON-RPC frames, and sent to with `crosstalk send`, while captured. One file holds the MCP frames both ways and the
socket lines, with no secret in it."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.capture import capture_dir_is_empty, finish, read_capture, secrets_of, start_capture, stop

pytestmark = pytest.mark.timeout(120)
CROSSTALK = str(Path(sys.executable).parent / "crosstalk")
SECRET = "sk-live-0123456789abcdefXYZ"
HEADER_SECRET = "ya29.header-secret-value-77"
META = {"crosstalk/session": "s-alice", "crosstalk/name": "alice"}


class Shim:
    """`crosstalk mcp --harness fake` as a subprocess speaking JSON lines."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
        self.proc = subprocess.Popen([CROSSTALK, "mcp", "--harness", "fake"], env=env, cwd=cwd, **pipes)
        self.buf = b""
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        answer = self.read()
        assert answer.get("id") == self.next_id, answer
        return answer

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 20.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"no answer from the shim within {timeout} s"
            ready, _, _ = select.select([self.proc.stdout.fileno()], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, "the shim closed stdout"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # EOF: the shim's orderly shutdown
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_mcp_frames_and_socket_lines_of_a_shim_hosted_agent_are_captured_redacted():
    root = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
    home, cwd = root / "h", root / "proj"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CROSSTALK_FAKE_ANSWER"}
    env.update(CROSSTALK_HOME=str(home), CROSSTALK_FAKE_INBOX_DIR=str(root), CLAUDE_CONFIG_DIR=str(root / "claude"),
               CODEX_HOME=str(root / "codex"))  # fmt: skip
    shim = Shim({**env, "OPENAI_API_KEY": SECRET}, cwd)  # a key in the shim's own environment
    cap = None
    try:
        init = shim.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                           "clientInfo": {"name": "capture-test", "version": "1"}})  # fmt: skip
        assert init["result"]["serverInfo"]["name"] == "crosstalk"
        shim.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = shim.request("tools/call", {"name": "list_agents", "arguments": {}, "_meta": META})
        assert "registered as" in listed["result"]["structuredContent"]["note"], listed  # alice lives in the shim
        [agent_id] = [p.stem for p in (home / "agents").glob("*.json")]

        out = root / "alice.capture.jsonl"
        cap = start_capture([CROSSTALK, "capture", "alice", "--for", "600", "-o", str(out)], env, root)
        assert shim.request("ping", {}) == {"jsonrpc": "2.0", "id": shim.next_id, "result": {}}
        meta = {**META, "authorization": f"Bearer {HEADER_SECRET}"}
        listed = shim.request("tools/call", {"name": "list_agents", "arguments": {}, "_meta": meta})
        assert not listed["result"]["isError"]
        sent = subprocess.run([CROSSTALK, "send", "alice", f"deploy with {SECRET} please"], env=env, cwd=root,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        box = shim.request("tools/call", {"name": "receive_message", "arguments": {}, "_meta": META})
        assert box["result"]["structuredContent"]["state"] == "ok", box
        assert f"deploy with {SECRET} please" in (root / "alice.jsonl").read_text()  # it reached the session
        cap.send_signal(2)  # Ctrl-C
        code, stdout, stderr = finish(cap)
        assert code == 0 and stdout.startswith("captured 9 frames (mcp 6, socket 3) from alice (interrupted)"), stderr

        header, records = read_capture(out)
        assert header["harness"] == "fake" and header["agent"]["agent_id"] == agent_id
        mcp = [r for r in records if r["channel"] == "mcp"]
        sock = [r for r in records if r["channel"] == "socket"]
        assert {r["direction"] for r in mcp} == {"in", "out"} and all("conn" not in r for r in mcp)
        methods = [(r["frame"].get("method"), r["frame"]["id"]) for r in mcp if r["direction"] == "in"]
        assert methods == [("ping", 3), ("tools/call", 4), ("tools/call", 5)]
        answers = {r["frame"]["id"]: r["frame"] for r in mcp if r["direction"] == "out"}
        assert sorted(answers) == [3, 4, 5] and answers[3]["result"] == {}
        [call] = [r["frame"] for r in mcp if r["frame"].get("id") == 4 and r["direction"] == "in"]
        assert call["params"]["_meta"] == {**META, "authorization": "[redacted]"}
        assert [r["direction"] for r in sock] == ["in", "in", "out"] and sock[0]["frame"]["token"] == "[redacted]"
        assert sock[1]["frame"]["message"]["content"] == "deploy with [redacted] please"  # a key of the shim's env
        text = out.read_text()
        assert SECRET not in text and HEADER_SECRET not in text
        for secret in secrets_of(home, agent_id):
            assert secret not in text
        assert capture_dir_is_empty(home)
    finally:
        if cap is not None:
            stop(cap)
        shim.close()
        shutil.rmtree(root, ignore_errors=True)
