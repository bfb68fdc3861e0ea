"""The per-agent A2A 1.0 JSON-RPC server: Agent Card + SendMessage/GetTask/ListTasks/CancelTask over a TaskApi.

Requests pass the edge gate (ingress/a2a/gate.py: bearer identity, body cap and deadline) before the SDK sees
them; their headers have a deadline too (ingress/a2a/protocol.py). No CORS header is ever sent. uvicorn runs as a
task in the caller's event loop, on a socket bound here, without touching the process's signal handlers or logging
configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from starlette.applications import Starlette
from starlette.middleware import Middleware

from crosstalk import __version__
from crosstalk.core.sender import Sender
from crosstalk.core.tasks import TaskApi
from crosstalk.ingress.a2a.gate import EdgeGate
from crosstalk.ingress.a2a.handler import A2ARequestHandler, OpHandler, SenderContextBuilder
from crosstalk.ingress.a2a.lazy import bind, check_no_paths, url_host
from crosstalk.ingress.a2a.protocol import KEEP_ALIVE_S, HeaderDeadlineProtocol
from crosstalk.ingress.errors import A2AServerError

log = logging.getLogger(__name__)

CARD_CACHE_CONTROL = "max-age=60"
# A2A 0.3 JSON-RPC clients are served too (`message/send`, `tasks/get`, …, told apart by method name): Gemini CLI
# 0.61.0's remote agents speak 0.3 and read a card's 0.3 fields (`url`, `preferredTransport`), which the SDK adds to
# the served card for a declared 0.3 interface.
V03_CLIENTS = True
BEARER_SCHEME = "bearer"  # the card's securitySchemes key
DEFAULT_BODY_LIMIT = 256 * 1024
START_TIMEOUT_S = 10.0
GRACEFUL_SHUTDOWN_S = 2  # in-flight requests (a default-wait send) get this long, then are cancelled
CLOSE_TIMEOUT_S = GRACEFUL_SHUTDOWN_S + 3.0


class A2AServer:
    """One agent's A2A endpoint. `to` is the receiving agent's name; `authenticate(token)` returns the verified
    Sender a bearer token names, or None to refuse it."""

    def __init__(
        self,
        *,
        name: str,
        description: str,
        tasks: TaskApi,
        authenticate: Callable[[str], Sender | Awaitable[Sender | None] | None],
        to: str,
        host: str = "127.0.0.1",
        port: int = 0,
        body_limit: int = DEFAULT_BODY_LIMIT,
        ops: OpHandler | None = None,
    ) -> None:
        check_no_paths("name", name)
        check_no_paths("description", description)
        self.name = name
        self.description = description
        self.host = host
        self.body_limit = body_limit
        self.url: str | None = None
        self.port: int | None = None
        self._tasks = tasks
        self._authenticate = authenticate
        self._to = to
        self._ops = ops  # claim/release requests (metadata.crosstalk.op); None: refused as unsupported
        self._want_port = port
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._handler: Any = None
        self._closing = False

    async def __aenter__(self) -> A2AServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, sock: socket.socket | None = None) -> str:
        """Bind (or take `sock`, already listening: lazy.LazyA2AServer), serve in the running loop, and return (and
        set) `.url` once the server accepts connections."""
        if self._task is not None:
            raise A2AServerError("A2A server already started")
        sock = sock if sock is not None else bind(self.host, self._want_port)
        port = sock.getsockname()[1]
        url = f"http://{url_host(self.host)}:{port}/"
        app = self._build_app(url)
        config = uvicorn.Config(
            app,
            host=self.host,
            port=port,
            log_level="warning",
            log_config=None,  # never reconfigure the host process's logging (uvicorn's default logs to stdout)
            lifespan="off",
            access_log=False,
            ws="none",
            http=HeaderDeadlineProtocol,  # h11 with a deadline on request headers (protocol.py)
            timeout_keep_alive=int(KEEP_ALIVE_S),  # uvicorn's 5 s equalled httpx's reuse window: a race (protocol.py)
            proxy_headers=False,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        server = _EmbeddedServer(config)
        task = asyncio.create_task(server.serve(sockets=[sock]), name=f"a2a-server:{self.name}")
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                while not server.started:
                    if task.done():
                        break
                    await asyncio.sleep(0.005)
        except TimeoutError:
            server.force_exit = server.should_exit = True
            task.cancel()
            sock.close()
            raise A2AServerError(f"A2A server did not start within {START_TIMEOUT_S:.0f} s") from None
        if task.done():
            sock.close()
            exc = task.exception() if not task.cancelled() else None
            raise A2AServerError(f"A2A server stopped while starting: {exc!r}") from exc
        self._server, self._task = server, task
        self.port, self.url = port, url
        return url

    async def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Stop accepting, let in-flight requests finish for a moment, then cancel what remains. Idempotent."""
        server, task = self._server, self._task
        self._server = self._task = None
        if server is None or task is None:
            return
        self._closing = True
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            log.warning("A2A server %s did not stop within %.1f s; cancelling it", self.name, timeout)
            server.force_exit = True
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 1.0)
        except Exception:
            log.exception("A2A server %s failed while stopping", self.name)

    def rename(self, name: str) -> None:
        """Address later messages to the agent's new alias. The published card keeps the name it started with
        until the agent restarts (the SDK serves a card built once); the URL and the bearer identity are unchanged."""
        self._to = name
        if self._handler is not None:
            self._handler.rename(name)

    def _build_app(self, url: str) -> Starlette:
        handler = A2ARequestHandler(self._tasks, to=self._to, ops=self._ops)
        self._handler = handler
        routes = [
            *create_agent_card_routes(
                build_card(name=self.name, description=self.description, url=url), cache_control=CARD_CACHE_CONTROL
            ),
            *create_jsonrpc_routes(
                handler, rpc_url="/", context_builder=SenderContextBuilder(), enable_v0_3_compat=V03_CLIENTS
            ),
        ]
        gate = Middleware(
            EdgeGate, authenticate=self._authenticate, body_limit=self.body_limit, closing=lambda: self._closing
        )
        return Starlette(routes=routes, middleware=[gate])


def build_card(*, name: str, description: str, url: str) -> pb.AgentCard:
    """The public Agent Card: JSON-RPC 1.0 (and 0.3, at the same URL, for V03_CLIENTS), bearer auth, no
    streaming/push/extended card, no paths."""
    versions = (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3) if V03_CLIENTS else (PROTOCOL_VERSION_1_0,)
    card = pb.AgentCard(
        name=name,
        description=description,
        version=__version__,
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=v)
            for v in versions
        ],
        capabilities=pb.AgentCapabilities(streaming=False, push_notifications=False, extended_agent_card=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            pb.AgentSkill(
                id="message",
                name="message",
                description="Deliver a message into this live agent session (kind and delivery in "
                "metadata.crosstalk; plain text is an inform).",
                tags=["crosstalk", "message"],
                input_modes=["text/plain"],
                output_modes=["text/plain"],
            )
        ],
    )
    card.security_schemes[BEARER_SCHEME].CopyFrom(
        pb.SecurityScheme(
            http_auth_security_scheme=pb.HTTPAuthSecurityScheme(
                scheme="Bearer", description="The sending agent's own crosstalk token: it names the sender."
            )
        )
    )
    requirement = pb.SecurityRequirement()
    requirement.schemes[BEARER_SCHEME].CopyFrom(pb.StringList())
    card.security_requirements.append(requirement)
    return card


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: the host process (a shim, an agent) owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29 spelled it this way
        return None
