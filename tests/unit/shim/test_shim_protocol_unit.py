"""crosstalk.shim.protocol.serve_stdio driven in-process over asyncio streams: JSON-RPC and MCP lifecycle edges."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any

import pytest

from crosstalk.shim import protocol
from crosstalk.shim.protocol import serve_stdio
from crosstalk.shim.router import CallContext, ToolResult
from tests.support.bounded import run_bounded
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(30)

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


class Router:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict, CallContext]] = []
        self.closed = 0
        self.cancelled: list[Any] = []
        self.close_hangs = False

    def tools(self) -> list[dict[str, Any]]:
        return [
            {"name": n, "description": n, "inputSchema": {"type": "object"}} for n in ("echo", "slow", "wrong", "boom")
        ]

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        self.calls.append((name, dict(arguments), ctx))
        if name == "slow":
            try:
                await asyncio.sleep(arguments.get("seconds", 30))
            except asyncio.CancelledError:
                self.cancelled.append(ctx.request_id)
                raise
        if name == "wrong":
            return {"not": "a ToolResult"}  # type: ignore[return-value]
        if name == "boom":
            raise ValueError("nope")
        return ToolResult({"echo": dict(arguments)})

    async def close(self) -> None:
        self.closed += 1
        if self.close_hangs:
            await asyncio.sleep(60)


class Out:
    """stdout: records each write; every write must be exactly one JSON line."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.event = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.event.set()

    async def drain(self) -> None:
        return None


class Shim:
    def __init__(self, router: Router | None = None, limit: int = protocol.LINE_LIMIT) -> None:
        self.router = router or Router()
        self.reader = asyncio.StreamReader(limit=limit)
        self.out = Out()
        self.read_at = 0
        self.task = asyncio.ensure_future(serve_stdio(self.router, stdin=self.reader, stdout=self.out))

    def feed(self, *msgs: Any) -> None:
        """Each message as a line, all in one chunk."""
        data = b"".join((m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in msgs)
        self.reader.feed_data(data)

    async def read(self, timeout: float = 5.0) -> Any:
        while self.read_at >= len(self.out.writes):
            self.out.event.clear()
            await asyncio.wait_for(self.out.event.wait(), timeout)
        line = self.out.writes[self.read_at]
        self.read_at += 1
        assert line.endswith(b"\n") and line.count(b"\n") == 1, line
        return json.loads(line)

    async def quiet(self, seconds: float = 0.2) -> bool:
        await asyncio.sleep(seconds)
        return self.read_at >= len(self.out.writes)

    async def init(self, version: str = "2025-06-18") -> dict:
        self.feed({**INIT, "params": {**INIT["params"], "protocolVersion": version}})
        answer = await self.read()
        self.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    async def eof(self) -> None:
        self.reader.feed_eof()
        await asyncio.wait_for(self.task, 15)


def run(coro) -> None:
    run_bounded(coro, 20)


def err(answer: dict) -> tuple[Any, int]:
    return answer["id"], answer["error"]["code"]


# ------------------------------------------------------------------------------------------------ lifecycle
def test_initialize_result() -> None:
    async def go() -> None:
        s = Shim()
        answer = await s.init("2025-06-18")
        assert answer["id"] == 0
        result = answer["result"]
        assert result["protocolVersion"] == "2025-06-18"
        assert result["capabilities"] == {"tools": {"listChanged": False}}
        assert result["serverInfo"]["name"] == "crosstalk" and result["serverInfo"]["version"]
        assert result["instructions"]
        await s.eof()

    run(go())


def test_initialize_negotiation_and_errors() -> None:
    async def go() -> None:
        s = Shim()
        s.feed({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        assert err(await s.read()) == (1, -32602)  # no protocolVersion
        assert (await s.init("1999-01-01"))["result"]["protocolVersion"] == protocol.LATEST_VERSION
        s.feed(INIT)
        assert err(await s.read()) == (0, -32600)  # already initialized
        await s.eof()

    run(go())


def test_requests_before_initialize() -> None:
    async def go() -> None:
        s = Shim()
        s.feed({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert err(await s.read()) == (1, -32602)
        s.feed({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}})
        assert err(await s.read()) == (2, -32602)
        s.feed({"jsonrpc": "2.0", "id": 3, "method": "ping"})  # ping is allowed at any time
        assert await s.read() == {"jsonrpc": "2.0", "id": 3, "result": {}}
        s.feed({"jsonrpc": "2.0", "id": 4, "method": "server/discover", "params": {}})  # 2026-07-28 probe
        assert err(await s.read()) == (4, -32601)
        s.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})  # a notification gets no answer
        assert await s.quiet()
        assert s.router.calls == []
        await s.init()
        s.feed({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        assert [t["name"] for t in (await s.read())["result"]["tools"]] == ["echo", "slow", "wrong", "boom"]
        await s.eof()

    run(go())


def test_eof_closes_router_once() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        await s.eof()
        assert s.router.closed == 1

    run(go())


def test_eof_before_anything_still_closes() -> None:
    async def go() -> None:
        s = Shim()
        await s.eof()
        assert s.router.closed == 1 and s.out.writes == []

    run(go())


def test_eof_cancels_long_calls_and_a_hanging_close_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "EOF_GRACE_S", 0.2)
    monkeypatch.setattr(protocol, "CLOSE_TIMEOUT_S", 0.2)

    async def go() -> None:
        router = Router()
        router.close_hangs = True
        s = Shim(router)
        await s.init()
        s.feed({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "slow"}})
        await until_async(lambda: router.calls, "the slow call started")
        await s.eof()
        assert router.cancelled == [9] and router.closed == 1
        assert await s.quiet(0.05)

    run(go())


# ------------------------------------------------------------------------------------------------ JSON-RPC
def test_malformed_json() -> None:
    async def go() -> None:
        s = Shim()
        s.feed(b"{not json", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"\xff\xfe")
        for _ in range(3):
            assert err(await s.read()) == (None, -32700)
        s.feed({"jsonrpc": "2.0", "id": 2, "method": "ping"})  # still serving
        assert (await s.read())["id"] == 2
        s.feed(b"", b"   ")  # blank lines are skipped
        assert await s.quiet()
        await s.eof()

    run(go())


def test_line_too_long() -> None:
    async def go() -> None:
        s = Shim(limit=200)
        s.feed(b'{"x": "' + b"a" * 500 + b'"}')
        assert err(await s.read()) == (None, -32700)
        s.feed({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert (await s.read())["id"] == 2
        await s.eof()

    run(go())


@pytest.mark.parametrize(
    ("msg", "answer_id"),
    [
        (42, None),
        ("ping", None),
        (None, None),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, 1),  # a valid id is echoed
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1),
        ({"jsonrpc": "2.0", "id": 1}, 1),
    ],
)
def test_invalid_requests(msg: Any, answer_id: int | None) -> None:
    async def go() -> None:
        s = Shim()
        s.feed(msg)
        answer = await s.read()
        assert answer["error"]["code"] == -32600
        assert answer["id"] == answer_id
        await s.eof()

    run(go())


def test_unknown_method_and_client_responses() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.feed({"jsonrpc": "2.0", "id": "a", "method": "resources/list"})
        assert err(await s.read()) == ("a", -32601)
        s.feed({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}})
        s.feed({"jsonrpc": "2.0", "id": 77, "result": {}})  # a response to nothing: ignored
        s.feed({"id": 78, "method": "ping"})  # a missing "jsonrpc" is tolerated
        assert (await s.read())["id"] == 78
        assert await s.quiet()
        await s.eof()

    run(go())


def test_batches_rejected_outside_2025_03_26() -> None:
    async def go() -> None:
        s = Shim()
        s.feed([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])  # before initialize
        assert err(await s.read()) == (None, -32600)
        await s.init("2025-06-18")
        s.feed([{"jsonrpc": "2.0", "id": 2, "method": "ping"}])
        assert err(await s.read()) == (None, -32600)
        assert s.router.calls == []
        await s.eof()

    run(go())


def test_batches_served_in_2025_03_26() -> None:
    async def go() -> None:
        s = Shim()
        await s.init("2025-03-26")
        s.feed([])
        assert err(await s.read()) == (None, -32600)
        s.feed(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/whatever"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"a": 1}}},
                {"jsonrpc": "2.0", "id": 3, "method": "nope"},
                {**INIT, "id": 4},
                5,
            ]
        )
        answer = await s.read()
        assert isinstance(answer, list)
        by_id = {a["id"]: a for a in answer if a["id"] is not None}
        assert by_id[1]["result"] == {}
        assert by_id[2]["result"]["structuredContent"] == {"echo": {"a": 1}}
        assert by_id[3]["error"]["code"] == -32601
        assert by_id[4]["error"]["code"] == -32600  # initialize must not be batched
        assert [a["error"]["code"] for a in answer if a["id"] is None] == [-32600]
        # a batch of notifications only gets no answer at all
        s.feed([{"jsonrpc": "2.0", "method": "notifications/whatever"}])
        assert await s.quiet()
        await s.eof()

    run(go())


# ------------------------------------------------------------------------------------------------ tools
def test_tools_list_cursor() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.feed({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": None}})
        assert len((await s.read())["result"]["tools"]) == 4
        s.feed({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "abc"}})
        assert err(await s.read()) == (2, -32602)
        s.feed({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": ["x"]})
        assert err(await s.read()) == (3, -32602)
        await s.eof()

    run(go())


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"name": 5},
        {"name": "echo", "arguments": [1]},
        {"name": "echo", "arguments": "x"},
        {"name": "echo", "_meta": "x"},
        {"name": "unknown_tool"},
    ],
)
def test_tools_call_bad_params(params: dict) -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.feed({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert err(await s.read()) == (1, -32602)
        assert s.router.calls == []
        await s.eof()

    run(go())


def test_tools_call_result_and_context() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.feed(
            {
                "jsonrpc": "2.0",
                "id": "r1",
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"t": "é\u2028"}, "_meta": {"threadId": "thr_1"}},
            }
        )
        answer = await s.read()
        assert answer["id"] == "r1"
        result = answer["result"]
        assert result["isError"] is False
        assert result["structuredContent"] == {"echo": {"t": "é\u2028"}}
        assert result["content"] == [
            {"type": "text", "text": json.dumps({"echo": {"t": "é\u2028"}}, ensure_ascii=False, separators=(",", ":"))}
        ]
        _name, _args, ctx = s.router.calls[0]
        assert ctx.meta == {"threadId": "thr_1"}
        assert ctx.client_info == {"name": "t", "version": "1"}
        assert ctx.request_id == "r1"
        assert ctx.parent_pid == os.getppid()
        # no arguments and no _meta: empty mappings
        s.feed({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": None}})
        assert (await s.read())["result"]["structuredContent"] == {"echo": {}}
        assert s.router.calls[1][2].meta == {}
        await s.eof()

    run(go())


def test_lone_surrogate_is_escaped() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.feed(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"t":"\\ud800"}}}')
        answer = await s.read()
        assert answer["result"]["structuredContent"] == {"echo": {"t": "\ud800"}}
        await s.eof()

    run(go())


def test_router_errors_become_tool_errors() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.feed({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "boom"}})
        result = (await s.read())["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["reason"] == "internal_error"
        assert "ValueError: nope" in result["structuredContent"]["detail"]
        s.feed({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wrong"}})
        result = (await s.read())["result"]
        assert result["isError"] is True and "ToolResult" in result["structuredContent"]["detail"]
        await s.eof()

    run(go())


def test_cancel_in_the_same_chunk_and_duplicate_ids() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        slow = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow"}}
        s.feed(slow, slow)  # the second is a duplicate of a running id
        assert err(await s.read()) == (1, -32600)
        s.feed(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow"}},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "r"}},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "junk"},
        )
        assert await s.quiet(0.3)
        assert sorted(s.router.cancelled) == [1, 2]
        s.feed({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}})  # id free again
        assert (await s.read())["id"] == 1
        await s.eof()

    run(go())


def test_every_write_is_one_json_line() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        for i in range(20):
            s.feed(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": "slow", "arguments": {"seconds": 0.001 * (i % 5)}},
                }
            )
            s.feed(b"junk")
        for _ in range(40):
            await s.read()
        await s.eof()
        assert all(w.endswith(b"\n") and w.count(b"\n") == 1 for w in s.out.writes)
        assert len(s.out.writes) == 41

    run(go())
