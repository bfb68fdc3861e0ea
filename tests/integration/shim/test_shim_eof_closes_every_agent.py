"""A real `crosstalk mcp` serving many sessions closes every agent it started when stdin closes: no descriptor,
socket, key or credential of theirs is left behind (their journals and lock files stay, by design)."""

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
from pathlib import Path

from crosstalk.registry.paths import StatePaths

CROSSTALK = str(Path(sys.executable).parent / "crosstalk")
SESSIONS = 60
READ_S = 60.0


def _read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float) -> list[dict[str, object]]:
    assert proc.stdout is not None
    fd, buf, out = proc.stdout.fileno(), b"", []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        left = deadline - time.monotonic()
        assert left > 0 and select.select([fd], [], [], left)[0], f"{len(out)} of {count} answers"
        chunk = os.read(fd, 1 << 16)
        assert chunk, "the shim closed stdout"
        buf += chunk
        *lines, buf = buf.split(b"\n")
        out += [json.loads(line) for line in lines if line.strip()]
    return out


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def test_eof_closes_every_agent_of_a_shim_serving_many_sessions() -> None:
    root = Path(tempfile.mkdtemp(prefix="xe", dir="/tmp"))
    paths = StatePaths(root / "st")
    env = {
        **os.environ,
        "CROSSTALK_HOME": str(paths.root),
        "CROSSTALK_FAKE_INBOX_DIR": str(root / "inbox"),
        "CLAUDE_CONFIG_DIR": str(root / "claude"),
        "CODEX_HOME": str(root / "codex"),
    }
    (root / "inbox").mkdir()
    proc = subprocess.Popen(
        [CROSSTALK, "mcp", "--harness", "fake"], env=env, cwd=root,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdin is not None
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
        proc.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        for i in range(SESSIONS):
            call = {"name": "list_agents", "arguments": {}, "_meta": {"crosstalk/session": f"session-{i}"}}
            proc.stdin.write(_line({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": call}))
        proc.stdin.flush()
        answers = _read_lines(proc, SESSIONS + 1, READ_S)
        assert all("result" in a for a in answers)
        bound = [p for p in paths.agents.glob("*.json")]
        assert len(bound) == SESSIONS
        proc.stdin.close()
        proc.wait(30)
        left = [*paths.agents.glob("*.json"), *paths.sock.iterdir(), *paths.credentials.iterdir()]
        assert left == [], f"{len(left)} files of closed agents left: {sorted(p.name for p in left)[:6]}"
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        shutil.rmtree(root, ignore_errors=True)
