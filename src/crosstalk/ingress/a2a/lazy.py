"""The per-agent A2A endpoint, bound at once and loaded on its first connection.

The A2A SDK and its HTTP stack (a2a, protobuf, starlette, uvicorn, httpx) cost a process about 33 MB of resident
memory. Crosstalk's own agents reach each other over their unix sockets (ingress/uds_tasks.py), so most sessions
never see an A2A client at all. `LazyA2AServer` binds the TCP port at start, so `url` (the descriptor's `a2a_url`)
is known and published as before, and watches the listening socket for readability without accepting anything.
When the first connection is waiting, it imports the stack (on a worker thread, so the event loop keeps serving
the agent's socket), builds the real `A2AServer` (server.py) over the same listening socket, and lets uvicorn
accept: the waiting connection never left the kernel's accept queue, so no connection is handed over or dropped.
From then on the agent serves A2A exactly as an eagerly started server does: the agent card, bearer auth at the
edge gate, SendMessage, GetTask, ListTasks and CancelTask.

Importing this module loads no SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import socket
from typing import Any

from crosstalk.ingress.errors import A2AServerError

log = logging.getLogger(__name__)

SERVER_MODULE = "crosstalk.ingress.a2a.server"


class LazyA2AServer:
    """An `A2AServer` (same keyword arguments) that imports the SDK only when a client first connects."""

    def __init__(self, **kwargs: Any) -> None:
        check_no_paths("name", str(kwargs.get("name", "")))  # as A2AServer does: fail at start, not at the first client
        check_no_paths("description", str(kwargs.get("description", "")))
        self._kwargs = dict(kwargs)
        self.host: str = kwargs.get("host", "127.0.0.1")
        self.url: str | None = None
        self.port: int | None = None
        self._sock: socket.socket | None = None
        self._server: Any = None  # the real A2AServer, once loaded
        self._loading: asyncio.Task[None] | None = None
        self._watching = False
        self._closed = False

    @property
    def loaded(self) -> bool:
        """Whether the SDK stack serves this endpoint yet (a client has connected)."""
        return self._server is not None

    async def start(self) -> str:
        """Bind and listen (connections queue in the kernel), and watch for the first one. Returns `url`."""
        if self._sock is not None:
            raise A2AServerError("A2A server already started")
        sock = bind(self.host, int(self._kwargs.get("port", 0)))
        self._sock = sock
        self.port = sock.getsockname()[1]
        self.url = f"http://{url_host(self.host)}:{self.port}/"
        asyncio.get_running_loop().add_reader(sock.fileno(), self._on_readable)
        self._watching = True
        return self.url

    def _on_readable(self) -> None:
        """A connection waits in the accept queue: stop watching, load the stack, let it accept."""
        self._unwatch()
        if self._loading is None and not self._closed:
            self._loading = asyncio.get_running_loop().create_task(self._load(), name=f"a2a-load:{self.port}")

    async def _load(self) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            module = await asyncio.to_thread(importlib.import_module, SERVER_MODULE)
            if self._closed:
                return
            server = module.A2AServer(**{**self._kwargs, "port": self.port})
            await server.start(sock=sock)
        except Exception:
            # Nothing can serve A2A here: close the port so clients fail fast (connection refused) instead of
            # waiting in a queue no one accepts from. The agent's socket and its other work are unaffected.
            log.exception("A2A endpoint %s could not be loaded; closing it", self.url)
            self._sock = None
            sock.close()
            return
        self._server = server

    def rename(self, name: str) -> None:
        """Address later messages to the agent's new alias (A2AServer.rename); before the stack loads, the card
        it builds then names the agent by it too."""
        self._kwargs["to"] = name
        if self._server is None:
            self._kwargs["name"] = name
        if self._server is not None:
            self._server.rename(name)

    async def close(self, timeout: float | None = None) -> None:
        """Stop watching or serving, and close the port. Idempotent."""
        self._closed = True
        self._unwatch()
        loading, self._loading = self._loading, None
        if loading is not None and not loading.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(loading), 30)
        server, self._server = self._server, None
        if server is not None:
            await (server.close() if timeout is None else server.close(timeout))
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()  # uvicorn does not close a socket it was handed

    def _unwatch(self) -> None:
        if self._watching and self._sock is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self._watching = False


def bind(host: str, port: int) -> socket.socket:
    """A listening, non-blocking TCP socket on (host, port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns on TCP_NODELAY only for sockets that say they are TCP. Without it, Nagle
    # holds uvicorn's response body behind its headers until the client's delayed ACK: ~40 ms on every request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise A2AServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def check_no_paths(field: str, text: str) -> None:
    """The card is public: it must not reveal where the session runs."""
    for path in {os.getcwd(), os.path.expanduser("~")}:
        if len(path) > 1 and path in text:
            raise ValueError(f"A2A card {field} must not contain a filesystem path ({path!r} found)")
