"""The A2A client agents use to reach each other, over the SDK's JSON-RPC transport with our bearer token.

Callers see crosstalk's records only: TaskView/TaskPage back, TaskError for the task-level errors (same codes the
server maps from), A2AAuthError for a refused token, A2AUnreachable/A2AOutcomeUnknown for transport failures,
A2AProtocolError for anything else the agent answered.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable
from typing import Any, TypeVar

import httpx
from a2a.client import ClientCallContext, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_1_0, VERSION_HEADER, TransportProtocol
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from crosstalk.core import untrusted
from crosstalk.core.errors import ErrorKind, TaskError
from crosstalk.core.message import Message
from crosstalk.core.tasks import TaskPage, TaskState, TaskView
from crosstalk.ingress.a2a.convert import STATE_TO_A2A, message_to_a2a, reply_message_to_view, task_from_a2a
from crosstalk.ingress.errors import A2AAuthError, A2AOutcomeUnknown, A2AProtocolError, A2AUnreachable

T = TypeVar("T")

CONNECT_TIMEOUT_S = 5.0
MAX_CARD_BYTES = 1024 * 1024  # an agent card is a few KiB; a larger body is not one
# A pooled connection is reused only this long after its last response. An agent closes an idle one after
# protocol.KEEP_ALIVE_S (75 s): with httpx's default (5 s, uvicorn's default too) a send picked a connection the
# agent closed before reading the request, and failed as an unknown outcome (seen under load, many at once). Long
# enough that agents talking seconds apart reuse one warm connection rather than connecting per message.
KEEPALIVE_EXPIRY_S = 60.0
ASK_WAIT_SLACK_S = 15.0  # a default-wait ask returns when answered or past its deadline: wait a little longer

# How a peer's A2A error reads here: the inverse of the table in crosstalk.core.errors for the task kinds, except
# that a peer's refusals of the request (bad params, content it cannot take) all read as invalid_request, and a
# push-notification refusal as unsupported_operation.
_TASK_ERRORS: dict[type[A2AError], ErrorKind] = {
    TaskNotFoundError: TaskError.NOT_FOUND,
    TaskNotCancelableError: TaskError.NOT_CANCELABLE,
    UnsupportedOperationError: TaskError.UNSUPPORTED,
    PushNotificationNotSupportedError: TaskError.UNSUPPORTED,
    InvalidRequestError: TaskError.INVALID,
    InvalidParamsError: TaskError.INVALID,
    ContentTypeNotSupportedError: TaskError.INVALID,
}


class A2AClient:
    """One peer agent, reached at `url` (its JSON-RPC interface) with our own bearer `token`.

    Use as `async with A2AClient(url, token) as peer: view = await peer.send(msg)`; without `async with` it opens
    on first use and `close()` releases it."""

    def __init__(self, url: str, token: str, timeout: float = 60) -> None:
        self.url = url
        self.timeout = timeout
        self._token = token
        self._http: httpx.AsyncClient | None = None
        self._client: Any = None

    async def __aenter__(self) -> A2AClient:
        self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        client, http = self._client, self._http
        self._client = self._http = None
        if client is not None:
            await client.close()  # the transport leaves a shared httpx client open
        if http is not None:
            await http.aclose()

    # -------------------------------------------------------------- the four operations

    async def send(
        self, message: Message, *, task_id: str | None = None, return_immediately: bool = False, op: str | None = None
    ) -> TaskView:
        """SendMessage. Without return_immediately the agent answers when the task is terminal (an ask: answered,
        failed or past its deadline), so the HTTP wait stretches to the ask's deadline plus slack. `op` ("claim",
        "release") makes it a request about the receiving agent itself rather than a message for its session."""
        request = pb.SendMessageRequest(
            message=message_to_a2a(message, task_id=task_id, op=op),
            configuration=pb.SendMessageConfiguration(return_immediately=return_immediately),
        )
        context = None
        ask_wait = message.deadline_seconds + ASK_WAIT_SLACK_S
        if not return_immediately and message.deadline_seconds and ask_wait > self.timeout:
            context = ClientCallContext(timeout=ask_wait)
        client = self._open()

        async def call() -> pb.StreamResponse:
            last = None
            async for event in client.send_message(request, context=context):
                last = event
            if last is None:
                raise A2AProtocolError("SendMessage returned nothing")
            return last

        response = await self._call(call())
        if response.HasField("task"):
            return task_from_a2a(response.task, kind=message.kind.value)
        if response.HasField("message"):
            return reply_message_to_view(response.message, message)
        raise A2AProtocolError("SendMessage returned neither a task nor a message")

    async def get(self, task_id: str) -> TaskView:
        task = await self._call(self._open().get_task(pb.GetTaskRequest(id=task_id)))
        return task_from_a2a(task)

    async def list(
        self,
        *,
        page_size: int = 50,
        page_token: str = "",
        context_id: str | None = None,
        state: TaskState | None = None,
    ) -> TaskPage:
        """ListTasks: only our own tasks at that agent, newest first."""
        request = pb.ListTasksRequest(page_size=page_size, page_token=page_token, context_id=context_id or "")
        if state is not None:
            request.status = STATE_TO_A2A[TaskState(state)]
        response = await self._call(self._open().list_tasks(request))
        return TaskPage(
            tasks=tuple(task_from_a2a(t) for t in response.tasks),
            next_page_token=response.next_page_token,
            total_size=response.total_size,
        )

    async def cancel(self, task_id: str) -> TaskView:
        task = await self._call(self._open().cancel_task(pb.CancelTaskRequest(id=task_id)))
        return task_from_a2a(task)

    # -------------------------------------------------------------- plumbing

    def _open(self) -> Any:
        if self._client is None:
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, CONNECT_TIMEOUT_S)),
                limits=httpx.Limits(  # httpx's default pool, with our reuse window
                    max_connections=100, max_keepalive_connections=20, keepalive_expiry=KEEPALIVE_EXPIRY_S
                ),
                # Plain http (every crosstalk agent listens on loopback): building a TLS context costs ~16 ms per
                # client for nothing. An https URL keeps httpx's default verification.
                verify=not self.url.startswith("http://"),
                headers={"Authorization": f"Bearer {self._token}", VERSION_HEADER: PROTOCOL_VERSION_1_0},
            )
            config = ClientConfig(
                httpx_client=self._http,
                streaming=False,
                supported_protocol_bindings=[TransportProtocol.JSONRPC.value],
            )
            self._client = ClientFactory(config).create(_peer_card(self.url))
        return self._client

    async def _call(self, awaitable: Awaitable[T]) -> T:
        try:
            return await awaitable
        except A2AClientError as exc:
            raise _transport_error(exc, self.url) from exc
        except A2AError as exc:
            raise _a2a_error(exc) from exc
        except httpx.HTTPError as exc:
            raise _httpx_error(exc, self.url) from exc


def _peer_card(url: str) -> pb.AgentCard:
    """What the client needs of the peer's card (one JSON-RPC 1.0 interface), without a round trip to fetch it."""
    return pb.AgentCard(
        supported_interfaces=[
            pb.AgentInterface(
                url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_1_0
            )
        ],
        capabilities=pb.AgentCapabilities(streaming=False, push_notifications=False, extended_agent_card=False),
    )


def _a2a_error(exc: A2AError) -> Exception:
    code = _TASK_ERRORS.get(type(exc))
    if code is not None:
        return TaskError(code, exc.message)
    return A2AProtocolError(f"A2A error: {exc.message}", jsonrpc_code=JSON_RPC_ERROR_CODE_MAP.get(type(exc)))


def _transport_error(exc: A2AClientError, url: str) -> Exception:
    cause = exc.__cause__
    if isinstance(cause, httpx.HTTPError):
        return _httpx_error(cause, url)
    if "closed" in exc.message.lower():
        return A2AUnreachable(f"A2A client for {url} is closed")
    return A2AProtocolError(f"A2A agent at {url}: {exc.message}")


def _httpx_error(exc: httpx.HTTPError, url: str) -> Exception:
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        if status in (401, 403):
            return A2AAuthError(f"A2A agent at {url} refused our token (HTTP {status})", status)
        if status >= 500:  # the agent failed or shut down mid-request: the message may have been accepted
            return A2AOutcomeUnknown(f"A2A agent at {url} failed mid-request (HTTP {status})")
        return A2AProtocolError(f"A2A agent at {url} answered HTTP {status}", status=status)
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | httpx.UnsupportedProtocol):
        return A2AUnreachable(f"A2A agent at {url} is unreachable: {exc.__class__.__name__}: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return A2AOutcomeUnknown(f"A2A agent at {url} did not answer in time ({exc.__class__.__name__})")
    if isinstance(exc, httpx.RequestError):
        return A2AOutcomeUnknown(f"A2A request to {url} failed mid-way: {exc.__class__.__name__}: {exc}")
    return A2AProtocolError(f"A2A agent at {url}: {exc}")


async def fetch_card(url: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """The agent's public card as served (a JSON object), checked to parse as an A2A AgentCard. For diagnostics."""
    target = url.rstrip("/") + AGENT_CARD_WELL_KNOWN_PATH
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_S))) as http:
        try:
            response = await http.get(target)
        except httpx.HTTPError as exc:
            raise _httpx_error(exc, url) from exc
    if response.status_code != 200:
        raise A2AProtocolError(f"agent card at {target}: HTTP {response.status_code}", status=response.status_code)
    try:
        card = untrusted.loads(response.content, what=f"agent card at {target}", max_bytes=MAX_CARD_BYTES)
        parse_agent_card(copy.deepcopy(card))
    except Exception as exc:
        raise A2AProtocolError(f"agent card at {target} is not a valid A2A card: {exc}") from exc
    if not isinstance(card, dict):
        raise A2AProtocolError(f"agent card at {target} is not a JSON object")
    return card
