"""The MCP stdio reader fed hostile lines in-process (serve_stdio over an asyncio StreamReader): a line nesting too
deeply, an over-limit line however it is split into writes, lone surrogates in tool arguments, and generated
garbage. Each line gets at most one error, the remainder of a dropped line is never run, and the server keeps
serving."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.shim.protocol import serve_stdio
from crosstalk.shim.router import CallContext, ToolResult
from crosstalk.shim.schemas import check_arguments, tool_definitions
from tests.support.bounded import run_bounded

pytestmark = pytest.mark.timeout(120)

LIMIT = 300
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


class Router:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def tools(self) -> list[dict[str, Any]]:
        return [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}]

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        self.calls.append(dict(arguments))
        return ToolResult({"echo": dict(arguments)})

    async def close(self) -> None:
        return None


class Out:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.event = asyncio.Event()

    def write(self, data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1, data
        self.lines.append(json.loads(data))
        self.event.set()

    async def drain(self) -> None:
        return None


class Shim:
    def __init__(self, limit: int = LIMIT) -> None:
        self.router = Router()
        self.reader = asyncio.StreamReader(limit=limit)
        self.out = Out()
        self.task = asyncio.ensure_future(serve_stdio(self.router, stdin=self.reader, stdout=self.out))

    def write(self, data: bytes) -> None:
        self.reader.feed_data(data)

    async def answer(self, rid: Any, timeout: float = 5.0) -> dict[str, Any]:
        """The answer carrying `rid`, waiting for it."""
        async with asyncio.timeout(timeout):
            while True:
                for line in self.out.lines:
                    if isinstance(line, dict) and line.get("id") == rid and ("result" in line or "error" in line):
                        return line
                self.out.event.clear()
                await self.out.event.wait()

    async def count(self, n: int, timeout: float = 5.0) -> None:
        """Wait until `n` answers were written."""
        async with asyncio.timeout(timeout):
            while len(self.out.lines) < n:
                self.out.event.clear()
                await self.out.event.wait()

    async def init(self) -> None:
        self.write(json.dumps(INIT).encode() + b"\n")
        await self.answer(0)

    async def eof(self) -> None:
        self.reader.feed_eof()
        await asyncio.wait_for(self.task, 15)


def run(coro: Any) -> None:
    run_bounded(coro, 30)


def ping(rid: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"}).encode() + b"\n"


def test_a_line_nesting_1000_levels_is_a_parse_error_naming_it() -> None:
    async def go() -> None:
        s = Shim(limit=64 * 1024)
        await s.init()
        deep = "[" * 1000 + "]" * 1000
        s.write(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"z":')
        s.write(deep.encode() + b"}}}\n")
        await s.count(2)
        error = s.out.lines[1]
        assert error["id"] is None and error["error"]["code"] == -32700
        assert "nested deeper than 64 levels" in error["error"]["message"]
        s.write(ping(2))
        assert (await s.answer(2))["result"] == {}
        assert s.router.calls == []
        await s.eof()

    run(go())


def test_an_over_limit_line_in_two_writes_is_dropped_whole() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.write(b'{"pad": "' + b"a" * (2 * LIMIT))  # over the limit, no newline yet
        await s.count(2)  # its one error, answered once the limit is passed
        assert s.out.lines[1]["id"] is None and s.out.lines[1]["error"]["code"] == -32700
        assert "size limit" in s.out.lines[1]["error"]["message"]
        # the tail of the same line is a whole request on its own: it must never run
        s.write(b'", "x": 1}' + ping(99))
        s.write(ping(3))
        assert (await s.answer(3))["result"] == {}
        assert [line.get("id") for line in s.out.lines] == [0, None, 3]
        await s.eof()

    run(go())


def test_an_over_limit_line_with_its_newline_in_one_write_is_one_error() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.write(b'{"pad": "' + b"a" * (2 * LIMIT) + b'"}\n' + ping(4))
        assert (await s.answer(4))["result"] == {}
        assert [line.get("id") for line in s.out.lines] == [0, None, 4]
        await s.eof()

    run(go())


def test_eof_inside_an_over_limit_line_ends_the_session() -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        s.write(b"x" * (3 * LIMIT))
        await s.eof()
        assert [line.get("id") for line in s.out.lines] == [0, None]

    run(go())


@pytest.mark.parametrize("tool", ["send_message", "ask", "reply"])
def test_a_lone_surrogate_in_a_text_argument_names_the_field(tool: str) -> None:
    schema = next(d["inputSchema"] for d in tool_definitions() if d["name"] == tool)
    args = {"text": json.loads('"hi \\ud800"')}
    args.update({"message_id": "m-1"} if tool == "reply" else {"to": "bob"})
    out, problem = check_arguments(schema, args)
    assert out == {} and problem is not None
    assert problem.startswith("text:") and "lone surrogate" in problem
    args["text"] = "fine"
    args["to" if tool != "reply" else "message_id"] = json.loads('"\\udc00x"')
    _, problem = check_arguments(schema, args)
    assert problem is not None and "surrogate" in problem and problem.split(":")[0] in ("to", "message_id")


# ------------------------------------------------------------------ generated hostile lines
def _nest(depth: int, open_: str) -> bytes:
    close = {"[": "]", "{": "}"}
    if open_ == "{":
        return (b'{"a":' * depth) + b"0" + b"}" * depth
    return (open_ * depth + close[open_] * depth).encode()


hostile_line = st.one_of(
    st.builds(_nest, st.integers(1, 3000), st.sampled_from(["[", "{"])),
    st.integers(1, 3000).map(lambda n: b"[" * n),  # unclosed
    st.integers(LIMIT + 1, 4 * LIMIT).map(lambda n: b'{"x":"' + b"a" * n + b'"}'),  # over the limit
    st.binary(max_size=2 * LIMIT).map(lambda b: b.replace(b"\n", b" ")),
    st.sampled_from([b'"\\ud800"', b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', b"\xed\xa0\x80", b"[]"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(hostile_line, min_size=1, max_size=5), cuts=st.lists(st.integers(1, 400), max_size=8))
def test_generated_hostile_lines_never_stop_the_server(lines: list[bytes], cuts: list[int]) -> None:
    async def go() -> None:
        s = Shim()
        await s.init()
        data = b"".join(line + b"\n" for line in lines) + ping("final")
        at = 0
        for cut in cuts:  # the same bytes in arbitrary writes
            s.write(data[at : at + cut])
            at += cut
            await asyncio.sleep(0)
        s.write(data[at:])
        assert (await s.answer("final"))["result"] == {}
        answered = [line for line in s.out.lines[1:] if line.get("id") != "final"]
        assert len(answered) <= len(lines)  # at most one answer a line; a dropped tail is never a request
        assert all(not isinstance(a, dict) or "error" in a or a.get("result") == {} for a in answered)
        assert s.router.calls == []
        await s.eof()

    run(go())
