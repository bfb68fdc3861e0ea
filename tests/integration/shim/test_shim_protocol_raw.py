"""`crosstalk mcp` as a subprocess spoken to in raw JSON lines: what the SDK client cannot show (no response for a
cancelled call, answers out of order, nothing but JSON on stdout, batches by version, EOF and SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.shim_sdk import raw_shim

pytestmark = pytest.mark.timeout(60)


def call(rid, name, arguments=None, meta=None) -> dict:
    params: dict = {"name": name, "arguments": arguments or {}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def wait_for(path: Path, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return path.exists()


def test_cancelled_call_gets_no_response_and_others_continue(tmp_path: Path) -> None:
    with raw_shim(tmp_path) as shim:
        shim.initialize()
        shim.send(call("slow-1", "slow", {"seconds": 30}))
        shim.send(call(2, "slow", {"seconds": 0.3}))
        shim.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1", "reason": "x"}}
        )
        assert shim.read()["id"] == 2
        assert wait_for(tmp_path / "cancelled-slow-1")
        assert shim.quiet(0.5)  # nothing for slow-1, ever
        # cancelling something unknown or finished is ignored
        shim.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        shim.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert shim.read() == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_responses_interleave_by_completion(tmp_path: Path) -> None:
    with raw_shim(tmp_path) as shim:
        shim.initialize()
        shim.send(call(1, "slow", {"seconds": 0.6}))
        shim.send(call(2, "echo", {"text": "fast"}))
        shim.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        got = [shim.read()["id"] for _ in range(3)]
        assert got[-1] == 1 and set(got) == {1, 2, 3}


def test_stdout_carries_only_protocol_json(tmp_path: Path) -> None:
    with raw_shim(tmp_path, "-v") as shim:
        shim.initialize()
        shim.send(call(1, "noisy"))
        assert shim.read()["result"]["isError"] is False
        shim.send(b"this is not json")
        assert shim.read()["error"]["code"] == -32700
        rest, code, err = shim.finish()
        assert code == 0
        assert rest == b""
        for line in shim.raw_lines:
            json.loads(line)
        assert b"NOISE from print()" in err and b"NOISE on fd 1" in err and b"NOISE from a child" in err
        assert b"initialize" in err  # -v logs to stderr


def test_eof_closes_router_and_exits_0(tmp_path: Path) -> None:
    with raw_shim(tmp_path, "--harness", "fake") as shim:
        shim.initialize()
        _rest, code, _err = shim.finish()
        assert code == 0
        assert json.loads((tmp_path / "closed").read_text()) == {"harness": "fake"}


def test_eof_lets_a_short_running_call_answer(tmp_path: Path) -> None:
    with raw_shim(tmp_path) as shim:
        shim.initialize()
        shim.send(call(1, "slow", {"seconds": 0.2}))
        rest, code, _err = shim.finish()
        assert code == 0
        assert json.loads(rest)["result"]["structuredContent"] == {"state": "ok", "slept": 0.2}


def test_sigterm_closes_router(tmp_path: Path) -> None:
    with raw_shim(tmp_path) as shim:
        shim.initialize()
        shim.send(call(1, "slow", {"seconds": 30}))
        assert wait_for(tmp_path / "started-1"), "the slow call never started"
        os.kill(shim.proc.pid, signal.SIGTERM)
        assert shim.proc.wait(15) == 0
        assert (tmp_path / "closed").exists()
        assert (tmp_path / "cancelled-1").exists()


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_version_echoed(tmp_path: Path, version: str) -> None:
    with raw_shim(tmp_path) as shim:
        assert shim.initialize(version)["result"]["protocolVersion"] == version


def test_unknown_version_gets_latest(tmp_path: Path) -> None:
    with raw_shim(tmp_path) as shim:
        assert shim.initialize("2026-07-28")["result"]["protocolVersion"] == "2025-11-25"


def test_batches_only_in_2025_03_26(tmp_path: Path) -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, call(2, "echo", {"text": "b"})]
    with raw_shim(tmp_path) as shim:
        shim.initialize("2025-03-26")
        shim.send(batch)
        answer = shim.read()
        assert isinstance(answer, list)
        assert sorted(a["id"] for a in answer) == [1, 2]
    with raw_shim(tmp_path) as shim:
        shim.initialize("2025-06-18")
        shim.send(batch)
        answer = shim.read()
        assert answer["id"] is None and answer["error"]["code"] == -32600
