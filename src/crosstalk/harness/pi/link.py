"""The core's side of the pi link (docs/dev/pi-link.md): one JSON object per line, the extension's requests on stdin,
ours on stdout. `deliver` waits for the extension's `delivered`; `call` requests are handed to one handler.

The link is asyncio on the core's event loop; every line written is flushed at once (the extension reads them as
they come), and a line from the extension is capped at MAX_LINE bytes (an over-limit line is dropped whole) and parsed
by core.untrusted (a line nesting too deeply is dropped like one that is not JSON).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from crosstalk.core import untrusted
from crosstalk.fs import trace
from crosstalk.harness.errors import LinkClosed

log = logging.getLogger(__name__)

MAX_LINE = 1024 * 1024
Handler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class PiLink:
    def __init__(self, reader: asyncio.StreamReader, write: Callable[[bytes], object]) -> None:
        self._reader = reader
        self._write = write
        self._refs = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._handler: Handler | None = None
        self._calls: set[asyncio.Task[None]] = set()
        self.closed = asyncio.Event()

    def serve(self, handler: Handler) -> None:
        self._handler = handler

    def send(self, message: dict[str, Any]) -> None:
        if self.closed.is_set():
            raise LinkClosed("the pi extension closed the link")
        self._write((json.dumps(message, ensure_ascii=False) + "\n").encode())

    async def deliver(self, text: str, as_: str, timeout: float) -> dict[str, Any]:
        """Hand one message to the extension's queue; its `delivered` answer (LinkClosed before it was sent,
        TimeoutError or LinkClosed after: the caller cannot know whether it landed)."""
        ref = str(next(self._refs))
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ref] = fut
        try:
            self.send({"t": "deliver", "ref": ref, "text": text, "as": as_})
            trace.mark("harness_write", harness="pi")
            closed = asyncio.ensure_future(self.closed.wait())
            waiters: set[asyncio.Future[Any]] = {fut, closed}
            try:
                done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                closed.cancel()
            if fut in done:
                return fut.result()
            if self.closed.is_set():
                raise LinkClosed("the pi extension closed the link before it answered")
            raise TimeoutError("the pi extension did not answer")
        finally:
            self._waiting.pop(ref, None)

    async def run(self) -> None:
        """Read the extension's lines until it closes its end."""
        try:
            while True:
                try:
                    line = await self._reader.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    return
                except asyncio.LimitOverrunError:
                    log.warning("a line from the pi extension is over %d bytes: dropped", MAX_LINE)
                    await self._skip_line()
                    continue
                self._on_line(line)
        finally:
            self.closed.set()

    async def _skip_line(self) -> None:
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return

    def _on_line(self, line: bytes) -> None:
        try:
            msg = untrusted.loads(line, what="a line from the pi extension", max_bytes=MAX_LINE)
        except untrusted.UntrustedInput as exc:  # not JSON, or nested too deeply: dropped, the link serves on
            log.warning("%s: %r", exc, line[:200])
            return
        if not isinstance(msg, dict):
            return
        kind = msg.get("t")
        if kind == "delivered":
            fut = self._waiting.get(str(msg.get("ref")))
            if fut is not None and not fut.done():
                fut.set_result(msg)
        elif kind == "call":
            task = asyncio.ensure_future(self._answer(msg))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    async def _answer(self, msg: dict[str, Any]) -> None:
        rid, op, args = msg.get("id"), msg.get("op"), msg.get("args")
        if not isinstance(op, str) or not isinstance(args, dict | None):
            result: dict[str, Any] = {"ok": False, "reason": "malformed_call"}
        elif self._handler is None:
            result = {"ok": False, "reason": "not_ready"}
        else:
            try:
                result = await self._handler(op, args or {})
            except Exception as exc:  # one bad request never ends the link
                log.exception("pi op %s failed", op)
                result = {"ok": False, "reason": "internal_error", "detail": str(exc)[:200]}
        try:
            self.send({"t": "result", "id": rid, "result": result})
        except LinkClosed:
            pass
