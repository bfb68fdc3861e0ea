"""The Codex app-server client's capture hook: the real client (crosstalk.harness.codex.appserver) against an
in-process WebSocket server on a unix socket that answers as the pinned app-server does (as in
tests/unit/harness/test_harness_codex_adapter.py), while this process is captured. The real app-server is driven
with a capture in tests/e2e/capture/test_capture_codex_live.py."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import unix_serve

from crosstalk.capture import request as rq
from crosstalk.capture import tap
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.codex import appserver
from tests.support.waiting import until_async

AGENT = "0123456789abcdef"
SECRET = "codex-session-secret-4711"


async def answer(ws: Any) -> None:
    async for frame in ws:
        msg = json.loads(frame)
        if "id" in msg:
            result = {"userAgent": "fake"} if msg["method"] == "initialize" else {"data": ["t-1"], "nextCursor": None}
            await ws.send(json.dumps({"id": msg["id"], "result": {**result, "accessToken": SECRET}}))
            await ws.send(json.dumps({"method": "thread/status/changed", "params": {"threadId": "t-1"}}))


def test_app_server_calls_are_captured_both_ways_and_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CROSSTALK_HOME", str(tmp_path))
    monkeypatch.setattr(tap, "_recorders", {})
    monkeypatch.setattr(appserver, "frame_observer", None)
    monkeypatch.setattr(tap, "_codex_hooked", False)
    directory = rq.capture_dir(tmp_path)
    directory.mkdir(mode=0o700)
    now = time.time()
    me = os.getpid()
    started = proc_start_time(me) or ""
    req = rq.CaptureRequest(AGENT, me, started, now - 1, now + 60, me, started)  # this process asks, and is asked
    rq.request_path(directory, AGENT).write_bytes(req.to_bytes())
    spool = rq.spool_path(directory, AGENT)
    spool.touch(mode=0o600)

    class Harness:
        def write(self, data: bytes) -> None:
            pass

    # The shim's first answer after a Codex agent loaded the client hooks the client (a frame through any tap).
    tap.tap_writer(Harness(), "mcp").write(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    assert appserver.frame_observer is tap.observe_app_server

    async def main() -> None:
        sock = str(tmp_path / "cx.sock")
        async with unix_serve(answer, sock):
            server = await appserver.AppServer.connect(sock)
            try:
                assert await appserver.loaded_threads(server) == ["t-1"]
                await server.notify("thread/unsubscribe", {"threadId": "t-1", "token": SECRET})
                # The server's notification after the list answer is read (and captured) too.
                await until_async(lambda: spool.read_bytes().count(b"thread/status/changed") == 2, "both notices")
            finally:
                await server.close()

    asyncio.run(main())
    records = [json.loads(line) for line in spool.read_bytes().splitlines()]
    codex = [r for r in records if r["channel"] == "app-server"]
    sent = [(r["frame"]["method"], r["frame"].get("id")) for r in codex if r["direction"] == "out"]
    assert sent == [("initialize", 1), ("initialized", None), ("thread/loaded/list", 2), ("thread/unsubscribe", None)]
    got = [r["frame"] for r in codex if r["direction"] == "in"]
    assert [m.get("id") for m in got if "id" in m] == [1, 2]
    assert {m["method"] for m in got if "method" in m} == {"thread/status/changed"}
    assert got[0]["result"] == {"userAgent": "fake", "accessToken": "[redacted]"}
    assert SECRET not in spool.read_text()
