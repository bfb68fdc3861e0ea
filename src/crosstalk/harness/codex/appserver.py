"""A client of `codex app-server` over its unix control socket (HARNESSES.md, Codex 0.171.0): WebSocket framing
(`ws://localhost/` over the socket), one JSON-RPC message per text frame, without the "jsonrpc" field; `initialize`
then the `initialized` notification. Notifications are read and dropped: the adapter asks, it does not follow.

`websockets` is imported here only, when a Codex agent binds or injects.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any

from crosstalk.core import untrusted
from crosstalk.fs import trace
from crosstalk.harness.codex.endpoints import CLIENT, MAX_FRAME
from crosstalk.harness.errors import AppServerError, AppServerGone

CONNECT_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 10.0
LIST_DEADLINE_S = 5.0  # listing the loaded threads, every page together
MAX_PAGES = 50
MAX_LOADED = 5000  # thread ids kept from one server's listing
# Told each message sent ("out") and received ("in"); crosstalk.capture sets it (this layer imports nothing above).
frame_observer: Callable[[str, str | bytes], None] | None = None


class AppServer:
    """One connection. `await AppServer.connect(path)`, then `request(...)`, then `close()`."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read(), name="codex-app-server-reader")

    @classmethod
    async def connect(cls, path: str) -> AppServer:
        from websockets.asyncio.client import unix_connect

        from crosstalk.harness.codex.endpoints import socket_problem

        problem = socket_problem(path)  # another user's socket never gets a message's content
        if problem is not None:
            raise AppServerGone(f"cannot connect to the Codex app-server: {problem}", sent=False)
        try:
            ws = await asyncio.wait_for(
                unix_connect(path, uri="ws://localhost/", max_size=MAX_FRAME, open_timeout=CONNECT_TIMEOUT_S),
                CONNECT_TIMEOUT_S,
            )
        except (OSError, TimeoutError, ValueError) as exc:
            raise AppServerGone(f"cannot connect to the Codex app-server at {path}: {exc}", sent=False) from None
        except Exception as exc:  # a websockets handshake error: not an app-server
            raise AppServerGone(f"{path} is not a Codex app-server: {exc}", sent=False) from None
        server = cls(ws)
        try:
            await server.request("initialize", {"clientInfo": CLIENT, "capabilities": {"experimentalApi": False}})
            await server.notify("initialized")
        except BaseException:
            await server.close()
            raise
        return server

    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None) -> Any:
        timeout = REQUEST_TIMEOUT_S if timeout is None else timeout
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await self._send({"id": rid, "method": method, "params": params})
        except AppServerGone:
            self._pending.pop(rid, None)
            raise
        try:
            answer = await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise AppServerGone(f"{method}: no answer within {timeout:.0f} s", sent=True) from None
        finally:
            self._pending.pop(rid, None)
        if "error" in answer:
            raise AppServerError(method, answer["error"])
        return answer.get("result")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._send({"method": method, **({"params": params} if params is not None else {})})

    async def _send(self, message: dict[str, Any]) -> None:
        try:
            frame = json.dumps(message)
            if frame_observer is not None:
                frame_observer("out", frame)
            await self._ws.send(frame)
            trace.mark("harness_write", harness="codex", method=message.get("method"))
        except Exception as exc:  # websockets refuses to send on a closed connection: nothing was written
            raise AppServerGone(f"the app-server connection is closed: {exc}", sent=False) from None

    async def _read(self) -> None:
        try:
            async for frame in self._ws:
                if frame_observer is not None:
                    frame_observer("in", frame)
                with contextlib.suppress(ValueError, TypeError, AttributeError):  # a bad frame is dropped
                    message = untrusted.loads(frame, what="a Codex app-server frame", max_bytes=MAX_FRAME)
                    fut = self._pending.get(message.get("id")) if "method" not in message else None
                    if fut is not None and not fut.done():
                        fut.set_result(message)
        except Exception:
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(AppServerGone("the app-server closed the connection", sent=True))

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._ws.close(), 2.0)


async def loaded_threads(server: AppServer, deadline_s: float = LIST_DEADLINE_S) -> list[str]:
    """The thread ids the server has loaded: every page, within one overall deadline (AppServerGone when it
    passes), at most MAX_PAGES pages and MAX_LOADED ids (a server that pages on forever is read this far)."""
    ids: list[str] = []
    cursor: str | None = None
    try:
        async with asyncio.timeout(deadline_s):
            for _ in range(MAX_PAGES):
                result = await server.request("thread/loaded/list", {"cursor": cursor} if cursor else {})
                data = result.get("data") if isinstance(result, dict) else None
                page = [t for t in data if isinstance(t, str)] if isinstance(data, list) else []
                ids += page[: MAX_LOADED - len(ids)]
                cursor = result.get("nextCursor") if isinstance(result, dict) else None
                if not isinstance(cursor, str) or not cursor or len(ids) >= MAX_LOADED:
                    break
    except TimeoutError:
        raise AppServerGone(f"thread/loaded/list: not done within {deadline_s:.0f} s", sent=True) from None
    return ids
