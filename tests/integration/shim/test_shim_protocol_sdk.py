"""`crosstalk mcp` driven as a subprocess by the official MCP SDK client (mcp 2.3.0): conformance of the
hand-written stdio server in crosstalk.shim.protocol."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from tests.support.shim_sdk import sdk_session
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(60)

mcp = pytest.importorskip("mcp")
from mcp import MCPError

from tests.support.bounded import run_bounded


def run(coro) -> None:
    run_bounded(coro, 45)


def test_initialize_list_call_ping(tmp_path: Path) -> None:
    async def go() -> None:
        async with sdk_session(tmp_path) as s:
            init = s.init_result
            assert init.protocol_version == "2025-11-25"
            assert init.server_info.name == "crosstalk"
            assert init.capabilities.tools is not None and init.capabilities.tools.list_changed is False
            assert init.instructions == "test router"

            tools = await s.list_tools()
            names = [t.name for t in tools.tools]
            assert names == ["echo", "fail", "boom", "slow", "whoami", "noisy", "typed"]
            echo = tools.tools[0]
            assert echo.input_schema["required"] == ["text"]
            assert tools.next_cursor is None

            res = await s.call_tool("echo", {"text": "héllo"})
            assert res.is_error is False
            assert res.structured_content == {"state": "ok", "echo": {"text": "héllo"}}
            assert len(res.content) == 1 and res.content[0].type == "text"
            assert json.loads(res.content[0].text) == res.structured_content

            # a tool with an outputSchema: the SDK validates structuredContent against it
            res = await s.call_tool("typed", {})
            assert res.structured_content == {"n": 7}

            await s.send_ping()

    run(go())


def test_tool_errors(tmp_path: Path) -> None:
    async def go() -> None:
        async with sdk_session(tmp_path) as s:
            await s.list_tools()
            res = await s.call_tool("fail", {})
            assert res.is_error is True
            assert res.structured_content == {"state": "error", "reason": "bad_thing", "hint": "try again"}

            # an exception in the tool is a tool execution error the model sees, not a protocol error
            res = await s.call_tool("boom", {})
            assert res.is_error is True
            assert res.structured_content["reason"] == "internal_error"
            assert "kaboom" in res.structured_content["detail"]

            # an unknown tool is a protocol error (-32602), per the spec's tools error handling
            with pytest.raises(MCPError) as info:
                await s.call_tool("no_such_tool", {})
            assert info.value.error.code == -32602

            # the session is still fine afterwards
            res = await s.call_tool("echo", {"text": "still here"})
            assert res.structured_content["echo"] == {"text": "still here"}

    run(go())


def test_meta_client_info_and_parent_pid_per_call(tmp_path: Path) -> None:
    async def go() -> None:
        async with sdk_session(tmp_path, "--harness", "codex", client_name="codex-mcp-client") as s:
            a = await s.call_tool("whoami", {}, meta={"threadId": "thr_A", "x-codex-turn-metadata": {"turn_id": "t1"}})
            b = await s.call_tool("whoami", {}, meta={"threadId": "thr_B"})
            c = await s.call_tool("whoami", {})
            assert a.structured_content["meta"]["threadId"] == "thr_A"
            assert a.structured_content["meta"]["x-codex-turn-metadata"] == {"turn_id": "t1"}
            assert b.structured_content["meta"]["threadId"] == "thr_B"
            assert "threadId" not in c.structured_content["meta"]
            assert a.structured_content["client_info"]["name"] == "codex-mcp-client"
            assert a.structured_content["parent_pid"] == os.getpid()  # the harness (here: this test) started it
            assert a.structured_content["harness"] == "codex"
            ids = {x.structured_content["request_id"] for x in (a, b, c)}
            assert len(ids) == 3

    run(go())


def test_concurrent_calls_answer_out_of_order(tmp_path: Path) -> None:
    async def go() -> None:
        async with sdk_session(tmp_path) as s:
            done: list[str] = []

            async def call(name: str, args: dict) -> None:
                await s.call_tool(name, args)
                done.append(name if name != "slow" else f"slow{args['seconds']}")

            await asyncio.gather(
                call("slow", {"seconds": 0.8}), call("slow", {"seconds": 0.1}), call("echo", {"text": "x"})
            )
            # Served serially, the answers would come back in call order (slow0.8 first); concurrently, by duration.
            assert done[-1] == "slow0.8"

    run(go())


def test_cancel_via_notifications_cancelled(tmp_path: Path) -> None:
    async def go() -> None:
        async with sdk_session(tmp_path) as s:
            task = asyncio.ensure_future(s.call_tool("slow", {"seconds": 30}))
            await until_async(lambda: list(tmp_path.glob("started-*")), "the slow call started")
            task.cancel()  # the SDK client sends notifications/cancelled for an abandoned request
            with pytest.raises(asyncio.CancelledError):
                await task
            deadline = time.monotonic() + 10
            while not list(tmp_path.glob("cancelled-*")) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert list(tmp_path.glob("cancelled-*")), "the tool's task was not cancelled"
            res = await s.call_tool("echo", {"text": "after cancel"})
            assert res.structured_content["echo"] == {"text": "after cancel"}

    run(go())


def test_close_on_stdin_eof(tmp_path: Path) -> None:
    async def go() -> None:
        async with sdk_session(tmp_path, "--harness", "claude") as s:
            await s.send_ping()
        # leaving stdio_client closes the shim's stdin; the shim closes the router before it exits
        assert json.loads((tmp_path / "closed").read_text()) == {"harness": "claude"}

    run(go())


def test_sdk_client_auto_mode_falls_back_to_initialize(tmp_path: Path) -> None:
    """mcp 2.3.0's `Client` probes 2026-07-28 `server/discover` first; -32601 makes it use the handshake."""
    from mcp import Client, StdioServerParameters

    from tests.support.shim_sdk import HERE, SHIM, kill_pid_file, shim_env

    async def go() -> None:
        params = StdioServerParameters(command=SHIM[0], args=SHIM[1:], env=shim_env(tmp_path), cwd=str(HERE))
        try:
            async with Client(params) as client:
                assert client.session.initialize_result is not None
                assert client.session.initialize_result.protocol_version == "2025-11-25"
                res = await client.call_tool("echo", {"text": "auto"})
                assert res.structured_content["echo"] == {"text": "auto"}
        finally:
            kill_pid_file(tmp_path)

    run(go())
