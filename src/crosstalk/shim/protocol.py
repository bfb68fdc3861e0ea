"""The server side of MCP over stdio, without the SDK: newline-delimited JSON-RPC 2.0 on stdin/stdout.

Why not the official `mcp` SDK: importing it costs ~0.5 s, and every harness session starts a shim (docs/dev/mcp-shim.md
has the numbers). What a harness needs from a tools-only server is small: `initialize` (version negotiation),
`notifications/initialized`, `ping`, `tools/list`, `tools/call`, `notifications/cancelled`. Conformance is proved by
driving `crosstalk mcp` with the official SDK's client (tests/integration/shim). What makes a JSON-RPC message well
formed, and the error codes, are jsonrpc.py's.

Spec decisions (MCP 2024-11-05 … 2025-11-25, the versions reachable through the `initialize` handshake):
- `initialize`: the client's `protocolVersion` is echoed when we speak it, else we answer with our latest
  (2025-11-25); a 2026-07-28 client probes `server/discover` first, gets -32601 and falls back to `initialize`.
- Requests other than `initialize` and `ping` before `initialize` is answered: -32602 (as the official SDK's server).
- Unknown method -32601; bad params (and an unknown tool name, per the spec's tools/error-handling) -32602;
  unparseable JSON (not UTF-8, nested deeper than core.untrusted allows, or over the line limit: such a line is
  dropped whole) -32700 with id null, naming the problem; a message that is not a request object -32600.
- A tool that fails (the router returns is_error, or raises) is a tool execution error: a normal result with
  `isError: true`, so the model sees the reason.
- JSON-RPC batches exist only in 2025-03-26: served there, answered -32600 in every other version.
- `notifications/cancelled` cancels the call's task and no response is sent for it (spec: cancellation).
- Every tools/call runs as its own task; each response is one line written whole, so lines never interleave.
- Nothing but protocol JSON reaches the protocol stream: when serving the real stdio, fd 1 is moved aside for the
  protocol and fd 1 itself is pointed at stderr, so a stray print (or a child process) cannot corrupt the stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os

from crosstalk import __version__
from crosstalk.core import untrusted
from crosstalk.fs import trace
from crosstalk.shim import jsonrpc as rpc
from crosstalk.shim.router import CallContext, ToolResult
from crosstalk.shim.stdio import LineReader, stdin_reader, stdout_writer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Coroutine, Mapping
    from typing import Any

    from crosstalk.shim.router import ToolRouter

log = logging.getLogger("crosstalk.shim")

# Newest first. These are the revisions a client reaches through `initialize`; 2026-07-28 has no handshake.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_VERSION = PROTOCOL_VERSIONS[0]
BATCH_VERSIONS = frozenset({"2025-03-26"})  # JSON-RPC batching was added in 2025-03-26 and removed in 2025-06-18

SERVER_NAME = "crosstalk"
INSTRUCTIONS = (
    "crosstalk connects you with the other live coding-agent sessions on this machine. Call list_agents to see "
    "who is there, send_message or ask to write to one by name, receive_message to read your mailbox, and reply "
    "to answer a message you received."
)

LINE_LIMIT = 64 * 1024 * 1024  # longest accepted request line, bytes
EOF_GRACE_S = 2.0  # after stdin closes, calls still running get this long to answer before they are cancelled
CLOSE_TIMEOUT_S = 5.0  # router.close() gets this long


async def serve_stdio(
    router: ToolRouter,
    *,
    stdin: asyncio.StreamReader | None = None,
    stdout: Any = None,
    instructions: str | None = None,
    handle_signals: bool | None = None,
) -> None:
    """Serve MCP on stdin/stdout until stdin closes (or SIGTERM/SIGINT), then `await router.close()` and return.

    `stdin`: an asyncio.StreamReader (default: this process's stdin). `stdout`: anything with `write(bytes)` and
    `async drain()`, e.g. an asyncio.StreamWriter (default: this process's stdout, which is then reserved for the
    protocol: fd 1 is redirected to stderr). `instructions`: the `initialize` instructions (default: the router's
    `instructions` attribute if it has one, else a short built-in text). `handle_signals` (default: when serving
    the real stdio): SIGTERM, SIGINT and SIGHUP end the session as EOF does.
    """
    loop = asyncio.get_running_loop()
    owns_stdio = stdin is None and stdout is None
    if stdout is None:
        stdout = await stdout_writer(loop)
    if stdin is None:
        stdin = await stdin_reader(loop, LINE_LIMIT)
    if instructions is None:
        instructions = getattr(router, "instructions", None) or INSTRUCTIONS
    stop = asyncio.Event()
    signals: list[int] = []
    if handle_signals if handle_signals is not None else owns_stdio:
        import signal

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                loop.add_signal_handler(sig, stop.set)
                signals.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
    server = _Server(router, stdout, instructions)
    try:
        await server.run(stdin, stop)
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)


class _Server:
    def __init__(self, router: ToolRouter, out: Any, instructions: str) -> None:
        self.router = router
        self.out = out
        self.instructions = instructions
        self.version: str | None = None  # negotiated by initialize
        self.client_info: dict[str, Any] = {}
        self.inflight: dict[str | int, asyncio.Task[Any]] = {}
        self.cancelled: set[str | int] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.out_broken = False

    # ------------------------------------------------------------------ loop
    async def run(self, reader: asyncio.StreamReader, stop: asyncio.Event) -> None:
        stop_wait = asyncio.ensure_future(stop.wait())
        lines = LineReader(reader)
        try:
            while True:
                read = asyncio.ensure_future(lines.next())
                done, _ = await asyncio.wait({read, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if read not in done:
                    read.cancel()
                    log.info("signal: shutting down")
                    break
                try:
                    line = read.result()
                except (ConnectionError, OSError) as exc:
                    log.info("stdin: %s", exc)
                    break
                if line is None:  # over the reader's limit: the whole line is dropped, up to its newline
                    message = "Parse error: the request line is over the size limit (dropped)"
                    self._send(rpc.error(None, rpc.PARSE_ERROR, message))
                    continue
                if not line:
                    log.info("stdin closed")
                    break
                self._on_line(line)
                if self.out_broken:
                    break
        finally:
            stop_wait.cancel()
            await self._shutdown()

    async def _shutdown(self) -> None:
        pending = [t for t in self.tasks if not t.done()]
        if pending and not self.out_broken:
            await asyncio.wait(pending, timeout=EOF_GRACE_S)
        pending = [t for t in self.tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)
        try:
            await asyncio.wait_for(self.router.close(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning("router.close() did not finish within %.0f s", CLOSE_TIMEOUT_S)
        except Exception:
            log.exception("router.close() failed")
        await self._drain()

    # ------------------------------------------------------------------ input
    def _on_line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        try:
            msg = untrusted.loads(line, what="the request line", max_bytes=LINE_LIMIT)
        except untrusted.UntrustedInput as exc:  # not JSON, not UTF-8, or nested too deeply
            log.debug("unparseable line: %s", exc)
            self._send(rpc.error(None, rpc.PARSE_ERROR, f"Parse error: {exc}"))
            return
        log.debug("<- %s", line[:500])
        if isinstance(msg, list):
            self._on_batch(msg)
            return
        answer = self._on_message(msg)
        if answer is None:
            return
        if isinstance(answer, dict):
            self._send(answer)
        else:
            rid, coro = answer
            self._spawn(self._answer_one(rid, self._start_call(rid, coro)))

    def _on_batch(self, batch: list[Any]) -> None:
        if not batch:
            self._send(rpc.error(None, rpc.INVALID_REQUEST, "empty batch"))
            return
        if self.version not in BATCH_VERSIONS:
            removed = "JSON-RPC batches are not supported in this protocol version (removed in MCP 2025-06-18)"
            self._send(rpc.error(None, rpc.INVALID_REQUEST, removed))
            return
        answers: list[dict[str, Any] | tuple[str | int, asyncio.Task[Any]]] = []
        for msg in batch:
            if isinstance(msg, dict) and msg.get("method") == "initialize":
                answers.append(rpc.error(msg.get("id"), rpc.INVALID_REQUEST, "initialize must not be part of a batch"))
                continue
            answer = self._on_message(msg)
            if isinstance(answer, tuple):
                answers.append((answer[0], self._start_call(*answer)))
            elif answer is not None:
                answers.append(answer)
        if answers:
            self._spawn(self._answer_batch(answers))

    def _on_message(self, msg: Any) -> dict[str, Any] | tuple[str | int, Coroutine[Any, Any, Any]] | None:
        """A response dict to send now, (id, coroutine) for a call to run as a task, or None (notification)."""
        found = rpc.classify(msg)
        if isinstance(found, rpc.Notification):
            self._on_notification(found.method, found.params)
            return None
        if not isinstance(found, rpc.Request):
            return found
        rid, method, params = found.rid, found.method, found.params
        if method == "initialize":
            return self._initialize(rid, params)
        if method == "ping":
            return rpc.result(rid, {})
        if method not in ("tools/list", "tools/call"):
            return rpc.error(rid, rpc.METHOD_NOT_FOUND, "Method not found", method)
        if self.version is None:
            return rpc.error(rid, rpc.INVALID_PARAMS, "Invalid request parameters", "server not initialized")
        if method == "tools/list":
            return self._tools_list(rid, params)
        return self._tools_call(rid, params)

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled":
            rid = params.get("requestId") if isinstance(params, dict) else None
            task = self.inflight.pop(rid, None) if isinstance(rid, str | int) else None
            if task is not None and rid is not None:
                log.info("request %r cancelled: %s", rid, params.get("reason"))
                self.cancelled.add(rid)
                task.cancel()
        else:
            log.debug("notification %s ignored", method)

    # ------------------------------------------------------------------ methods
    def _initialize(self, rid: str | int, params: Mapping[str, Any]) -> dict[str, Any]:
        if self.version is not None:
            return rpc.error(rid, rpc.INVALID_REQUEST, "Invalid Request: already initialized")
        wanted = params.get("protocolVersion")
        if not isinstance(wanted, str):
            return rpc.error(rid, rpc.INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
        self.version = wanted if wanted in PROTOCOL_VERSIONS else LATEST_VERSION
        info = params.get("clientInfo")
        self.client_info = dict(info) if isinstance(info, dict) else {}
        log.info("initialize: client %s, protocol %s (asked %s)", self.client_info, self.version, wanted)
        result: dict[str, Any] = {
            "protocolVersion": self.version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return rpc.result(rid, result)

    def _tools_list(self, rid: str | int, params: Mapping[str, Any]) -> dict[str, Any]:
        cursor = params.get("cursor")
        if cursor is not None:  # one page, so no cursor of ours exists
            return rpc.error(rid, rpc.INVALID_PARAMS, "Invalid params: unknown cursor", cursor)
        try:
            tools = list(self.router.tools())
        except Exception:
            log.exception("router.tools() failed")
            return rpc.error(rid, rpc.INTERNAL_ERROR, "Internal error")
        return rpc.result(rid, {"tools": tools})

    def _tools_call(
        self, rid: str | int, params: Mapping[str, Any]
    ) -> dict[str, Any] | tuple[str | int, Coroutine[Any, Any, Any]]:
        name = params.get("name")
        if not isinstance(name, str):
            return rpc.error(rid, rpc.INVALID_PARAMS, "Invalid params: name must be a string")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return rpc.error(rid, rpc.INVALID_PARAMS, "Invalid params: arguments must be an object")
        meta = params.get("_meta")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            return rpc.error(rid, rpc.INVALID_PARAMS, "Invalid params: _meta must be an object")
        try:
            known = {t.get("name") for t in self.router.tools()}
        except Exception:
            log.exception("router.tools() failed")
            return rpc.error(rid, rpc.INTERNAL_ERROR, "Internal error")
        if name not in known:
            return rpc.error(rid, rpc.INVALID_PARAMS, f"Unknown tool: {name}", {"known": sorted(str(n) for n in known)})
        if rid in self.inflight:
            return rpc.error(rid, rpc.INVALID_REQUEST, "Invalid Request: a request with this id is still running")
        ctx = CallContext(meta=meta, client_info=self.client_info, parent_pid=os.getppid(), request_id=rid)
        trace.mark("tool_call", tool=name)
        return rid, self._call(rid, name, arguments, ctx)

    async def _call(self, rid: str | int, name: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        try:
            result = await self.router.call(name, arguments, ctx)
            if not isinstance(result, ToolResult):
                raise TypeError(f"router.call returned {type(result).__name__}, not ToolResult")
            data = dict(result.data)
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
            is_error = bool(result.is_error)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("tool %s failed", name)
            data = {"state": "error", "reason": "internal_error", "detail": f"{type(exc).__name__}: {exc}"[:500]}
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
            is_error = True
        trace.mark("tool_result", tool=name)
        return rpc.result(
            rid, {"content": [{"type": "text", "text": text}], "structuredContent": data, "isError": is_error}
        )

    # ------------------------------------------------------------------ tasks and output
    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _start_call(self, rid: str | int, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Start one call as its own task, registered at once so a cancellation right behind it finds it."""
        task = asyncio.ensure_future(coro)
        self.inflight[rid] = task
        return task

    async def _run_call(self, rid: str | int, task: asyncio.Task[Any]) -> dict[str, Any] | None:
        """Await a started call; None when it was cancelled by the client."""
        try:
            answer = await task
        except asyncio.CancelledError:
            answer = None
            if not task.cancelled() and rid not in self.cancelled:
                raise  # the waiter itself is being cancelled (shutdown)
        finally:
            if self.inflight.get(rid) is task:
                del self.inflight[rid]
        if rid in self.cancelled:
            self.cancelled.discard(rid)
            return None  # spec: no response for a cancelled request
        return answer

    async def _answer_one(self, rid: str | int, task: asyncio.Task[Any]) -> None:
        answer = await self._run_call(rid, task)
        if answer is not None:
            self._send(answer)
            await self._drain()

    async def _answer_batch(self, answers: list[Any]) -> None:
        async def one(answer: Any) -> dict[str, Any] | None:
            return answer if isinstance(answer, dict) else await self._run_call(*answer)

        results = await asyncio.gather(*(one(a) for a in answers))
        out = [r for r in results if r is not None]
        if out:
            self._send(out)
            await self._drain()

    def _send(self, obj: Any) -> None:
        """Write one message as one line. Synchronous, so two messages never interleave."""
        if self.out_broken:
            return
        try:
            data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        except UnicodeEncodeError:  # lone surrogates in a string: escape them instead
            data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        try:
            self.out.write(data)
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.info("stdout: %s", exc)
            self.out_broken = True
            return
        log.debug("-> %s", data[:500])

    async def _drain(self) -> None:
        if self.out_broken:
            return
        try:
            await self.out.drain()
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.info("stdout: %s", exc)
            self.out_broken = True
