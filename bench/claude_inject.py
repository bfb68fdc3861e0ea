"""The Claude adapter's own part of a delivery, in one process: `inject` → its frame written and half-closed into a
Claude messaging socket (a fake that reads to EOF and closes, as Claude 2.1.332 does), beside a bare write of the same
bytes by the same process (connect, one send, half-close: what no adapter can go below). The session's record, the
project's two settings files and the user's settings are there as a real session has them, saved a while ago.

What it shows: the adapter's per-message work before its write (the record and the `crossSessionInbound` settings,
stat-checked and reused: harness/claude/inbound.py; the frame; the connection). The live figure, with Claude, the
sending shim and the chain around it, is bench/own_part.py.

    .venv/bin/python bench/claude_inject.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import exit_on_sigterm, stats, versus
from _live import report
from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.base import AgentInfo, InjectRequest, SessionIdentity
from crosstalk.harness.claude import adapter as claude_adapter
from crosstalk.harness.claude.adapter import ClaudeAdapter

ME = os.getpid()
ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "a2a")
SETTLED_S = 3.5  # the files' age before the run: past the read cache's racy window, as a user's saved files are


def request() -> InjectRequest:
    msg = Message(message_id=new_message_id(), to="bob", parts=(TextPart("hello from alice"),), kind=Kind.INFORM)
    return InjectRequest(msg, ALICE, Delivery.AUTO, reply_address="/x/sock/a11ce.sock")


def session(root: Path, sock: Path) -> dict[str, str]:
    project = root / "project"
    (project / ".claude").mkdir(parents=True)
    (root / "sessions").mkdir()
    record = {"pid": ME, "sessionId": "s-1", "procStart": proc_start_time(ME), "status": "idle", "cwd": str(project),
              "version": "2.1.332", "messagingSocketPath": str(sock), "kind": "interactive", "name": "bob"}  # fmt: skip
    (root / "sessions" / f"{ME}.json").write_text(json.dumps(record))
    allow = [f"Bash(tool-{i}:*)" for i in range(40)]
    (root / "settings.json").write_text(json.dumps({"permissions": {"allow": allow}, "model": "opus"}))
    (project / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Read"]}}))
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"crossSessionInbound": "accept"}))
    return {"CLAUDE_CONFIG_DIR": str(root), "CLAUDE_CODE_MESSAGING_SOCKET": str(sock),
            "CLAUDE_CODE_MESSAGING_TOKEN": "child-token"}  # fmt: skip


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # to our half-close; then close, answering nothing
    writer.close()


async def run(root: Path, rounds: int) -> tuple[list[float], list[float]]:
    sock = root / "cc.sock"
    environ = session(root, sock)
    time.sleep(SETTLED_S)
    server = await asyncio.start_unix_server(serve, path=str(sock))
    loop = asyncio.get_running_loop()
    written: list[float] = []
    claude_adapter.trace.mark = lambda event, **_: written.append(time.perf_counter())  # type: ignore[assignment]
    claude_adapter.RECEIPT_GRACE_S = 0.0  # no receipt comes; its wait is after the write and not measured here
    try:
        a = ClaudeAdapter(SessionIdentity("claude", "s-1", "bob", harness_pid=ME), environ)
        await a.bind(AgentInfo("b0b0b0b0b0b0b0b0", "bob", "s-1", "/x/sock/b0b.sock", "/w"))
        payload = json.dumps({"type": "auth", "token": "child-token"}) + "\n" + json.dumps({"msg": "x" * 400}) + "\n"
        ours, bare = [], []
        for i in range(rounds + 20):  # the first 20 warm up
            written.clear()
            t0 = time.perf_counter()
            await a.inject(request())
            ours_s = written[0] - t0
            t0 = time.perf_counter()
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            s.setblocking(False)
            await loop.sock_connect(s, str(sock))
            await loop.sock_sendall(s, payload.encode())
            s.shutdown(socket.SHUT_WR)
            bare_s = time.perf_counter() - t0
            await loop.sock_recv(s, 4096)
            s.close()
            if i >= 20:
                ours.append(ours_s)
                bare.append(bare_s)
        return ours, bare
    finally:
        server.close()
        await server.wait_closed()


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    rounds = 300 if ap.parse_args().quick else 2000
    root = Path(tempfile.mkdtemp(prefix="xci", dir="/tmp"))
    try:
        ours, bare = asyncio.run(run(root, rounds))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    o, b = stats(ours), stats(bare)
    figures = [
        versus("claude_inject_p50", o["p50"], b["p50"], "us", "bare socket write p50",
               summary="inject -> frame written and half-closed, in one process"),
        versus("claude_inject_p99", o["p99"], b["p99"], "us", "bare socket write p99"),
    ]  # fmt: skip
    report("claude_inject", figures, {"rounds": rounds, "load": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
