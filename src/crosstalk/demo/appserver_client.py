"""A blocking client of `codex app-server` over its unix control socket, as a user's client (the interactive codex,
an IDE) attaches: WebSocket framing, one JSON-RPC message per text frame, `initialize` then `initialized`.
Notifications are dropped. The demo drives its Codex thread with it, and the e2e tests drive theirs; crosstalk's
own adapter uses the asyncio client in harness/codex/appserver.py."""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import threading
from pathlib import Path
from typing import Any

from crosstalk.core import untrusted
from crosstalk.core.errors import CrosstalkError
from crosstalk.harness.codex.appserver import MAX_FRAME


class AppServerClientError(CrosstalkError, RuntimeError):
    """The connection failed or broke, the server gave no answer in time, or it answered with an error."""


class AppServerClient:
    """`AppServerClient.connect(socket, name, timeout)`, then `request(method, params)`, then `close()`."""

    def __init__(self, ws: Any, timeout: float, stack: contextlib.ExitStack) -> None:
        self._ws, self.timeout, self._stack = ws, timeout, stack
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        threading.Thread(target=self._read, name="codex-app-server-client", daemon=True).start()

    @classmethod
    def connect(cls, socket: Path, name: str, timeout: float) -> AppServerClient:
        from websockets.sync.client import unix_connect

        stack = contextlib.ExitStack()  # entered, as websockets wants its connections used
        try:
            connection = unix_connect(str(socket), uri="ws://localhost/", max_size=None, open_timeout=timeout)
            ws = stack.enter_context(connection)
        except Exception as exc:  # OSError, or the websockets handshake's own errors
            raise AppServerClientError(f"cannot connect to {socket}: {exc}") from None
        client = cls(ws, timeout, stack)
        client.request("initialize", {"clientInfo": {"name": name, "title": None, "version": "1"},
                                      "capabilities": {"experimentalApi": False}})  # fmt: skip
        client._send({"method": "initialized"})
        return client

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._ws.send(json.dumps(message))
        except Exception as exc:  # the connection closed: websockets' ConnectionClosed
            raise AppServerClientError(f"connection closed: {exc}") from None

    def _read(self) -> None:
        with contextlib.suppress(Exception):
            while True:
                message = untrusted.loads(self._ws.recv(), what="an app-server frame", max_bytes=MAX_FRAME)
                box = self._answers.get(message.get("id")) if "method" not in message else None
                if box is not None:
                    box.put(message)

    def request(self, method: str, params: dict[str, Any]) -> Any:
        """The result of one request; AppServerClientError when none comes within the timeout or it is an error."""
        rid = next(self._ids)
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        self._answers[rid] = box
        try:
            self._send({"id": rid, "method": method, "params": params})
            try:
                answer = box.get(timeout=self.timeout)
            except queue.Empty:
                raise AppServerClientError(f"no answer to {method} within {self.timeout:g} s") from None
        finally:
            self._answers.pop(rid, None)
        if "error" in answer:
            raise AppServerClientError(f"{method}: {answer['error']}")
        return answer["result"]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stack.close()
