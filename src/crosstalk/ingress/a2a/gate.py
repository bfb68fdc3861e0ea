"""The A2A edge gate, a pure ASGI middleware in front of the SDK routes: the authenticate step of the A2A ingress.

The card path is public; anything else needs `Authorization: Bearer <token>` that `authenticate` maps to a verified
Sender (else 401), and a body within `body_limit` (else a JSON-RPC InvalidRequest error, id null, read with the cap
before anything decodes it) that arrives whole within `body_timeout` seconds (else 408 and the connection closed:
neither uvicorn nor h11 bounds a body read, so a false Content-Length would hold the connection forever) and is
UTF-8 JSON within crosstalk's depth bound (else a JSON-RPC parse error, as JSON that is not UTF-8 is not JSON:
RFC 8259 §8.1; the SDK would answer both with an internal error).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, VERSION_HEADER
from a2a.utils.errors import InvalidRequestError

from crosstalk.core import untrusted
from crosstalk.core.errors import CrosstalkError, ErrorKind, jsonrpc_code
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.fs import trace
from crosstalk.ingress.a2a.handler import SENDER_STATE_KEY

log = logging.getLogger(__name__)

CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
DRAIN_LIMIT = 8 * 1024 * 1024  # read (and drop) at most this much of a refused body so the client sees our answer
UNAUTHENTICATED_CODE = jsonrpc_code(ErrorKind.UNAUTHENTICATED)  # A2A names no code for a refused token
PARSE_ERROR_CODE = jsonrpc_code(ErrorKind.PARSE_ERROR)
BODY_TIMEOUT_S = 10.0  # the whole request body must arrive within this; loopback delivers 256 KiB in milliseconds

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[..., Awaitable[None]]], Awaitable[None]
]


class EdgeGate:
    """Pure ASGI gate in front of the SDK routes: bearer auth (card path public), A2A-Version from the query
    string when the header is absent (A2A 1.0 §3.6.2 lets clients send it either way), the body cap, and a clear
    503 for a request still waiting (a default-wait send) when the server is closed under it."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticate: Callable[[str], Sender | Awaitable[Sender | None] | None],
        body_limit: int,
        closing: Callable[[], bool] = lambda: False,
        body_timeout: float | None = None,
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.body_limit = body_limit
        self.closing = closing
        self.body_timeout = body_timeout  # None: BODY_TIMEOUT_S, read per request

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") == CARD_PATH:
            await self.app(scope, receive, send)
            return
        trace.mark("a2a_in")
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        sender = await self._sender(headers.get(b"authorization", b""))
        timeout = BODY_TIMEOUT_S if self.body_timeout is None else self.body_timeout
        if sender is None:
            try:
                async with asyncio.timeout(timeout):
                    await _drain(receive, self.body_limit)
            except TimeoutError:
                await _send_body_timeout(send, timeout)
                return
            await _send_json(send, 401, _unauthenticated_body(), [(b"www-authenticate", b'Bearer realm="crosstalk"')])
            return
        scope = dict(scope)
        scope["state"] = {**scope.get("state", {}), SENDER_STATE_KEY: sender}
        version_header = VERSION_HEADER.lower().encode()
        if version_header not in headers:
            version = _query_version(scope.get("query_string", b""))
            if version:
                scope["headers"] = [*scope.get("headers", []), (version_header, version.encode("latin-1"))]
        try:
            async with asyncio.timeout(timeout):
                body = await _read_capped(receive, self.body_limit)
        except _ClientGone:
            return
        except TimeoutError:
            await _send_body_timeout(send, timeout)
            return
        except _BodyTooLarge:
            err = InvalidRequestError(message=f"request body is over the {self.body_limit}-byte limit")
            await _send_json(send, 200, build_error_response(None, err))
            return
        problem = _parse_problem(body)
        if problem is not None:
            await _send_json(
                send, 200, {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR_CODE, "message": problem}}
            )
            return
        started = False

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        trace.mark("a2a_authed")
        try:
            await self.app(scope, _replay(body, receive), tracked_send)
        except asyncio.CancelledError:
            if started or not self.closing():
                raise
            # uvicorn cancels requests still running after its graceful-shutdown window; answer instead of letting
            # it log a traceback and send a bare 500. The message may already be journaled: the outcome is unknown.
            await _send_json(send, 503, _shutting_down_body(), [(b"connection", b"close")])

    async def _sender(self, header: bytes) -> Sender | None:
        try:
            scheme, _, token = header.decode("latin-1").partition(" ")
        except Exception:
            return None
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        try:
            sender = self.authenticate(token)
            if inspect.isawaitable(sender):  # an async authenticate works too
                sender = await sender
        except Exception:
            log.exception("A2A authenticate() failed; refusing the request")
            return None
        if not isinstance(sender, Sender) or sender.sender_class is not SenderClass.VERIFIED or not sender.agent_id:
            return None
        return sender


# Control flow inside this module only: _read_capped's two ways of not returning a body. Each is answered here (413,
# or nothing to a client that left) and never reaches another module.
class _BodyTooLarge(CrosstalkError):
    pass


class _ClientGone(CrosstalkError):
    pass


async def _read_capped(receive: Any, limit: int) -> bytes:
    """The whole request body. Past `limit` the rest is drained and dropped (up to DRAIN_LIMIT) and
    _BodyTooLarge raised; a disconnect raises _ClientGone."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        if message["type"] != "http.request":
            continue
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            if message.get("more_body", False):
                await _drain(receive, DRAIN_LIMIT - size)
            raise _BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _drain(receive: Any, budget: int) -> None:
    """Read and drop the rest of a body we refuse, up to `budget` bytes, so the answer is not lost to a reset."""
    while budget > 0:
        message = await receive()
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _parse_problem(body: bytes) -> str | None:
    """Why the body is not acceptable JSON (a JSON-RPC parse error), or None. The SDK would answer -32603 for a body
    that is not UTF-8 (UnicodeDecodeError) or nests deeply (RecursionError), so both are bounded here first."""
    try:
        body.decode("utf-8")  # strict: json.loads(bytes) would let encoded surrogates through
    except UnicodeDecodeError as exc:
        return f"Parse error: the request body is not valid UTF-8 ({exc})"
    # Depth only: whether the body is JSON at all (and what it means) stays the SDK's to answer.
    if untrusted.json_depth(body) > untrusted.MAX_DEPTH:
        return f"Parse error: the request body is nested deeper than {untrusted.MAX_DEPTH} levels"
    return None


def _replay(body: bytes, receive: Any) -> Callable[[], Awaitable[dict[str, Any]]]:
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: only a disconnect can come

    return replay


def _query_version(query_string: bytes) -> str | None:
    try:
        values = parse_qs(query_string.decode("latin-1")).get(VERSION_HEADER)
    except Exception:
        return None
    return values[0] if values else None


async def _send_body_timeout(send: Any, timeout: float) -> None:
    """408 with a JSON-RPC error, and `connection: close` so uvicorn drops the connection the body never finished."""
    err = InvalidRequestError(message=f"the request body did not arrive in full within {timeout:g} s")
    await _send_json(send, 408, build_error_response(None, err), [(b"connection", b"close")])


def _unauthenticated_body() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": UNAUTHENTICATED_CODE,
            "message": "Unauthenticated: a valid 'Authorization: Bearer <token>' header is required",
            "data": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "UNAUTHENTICATED",
                    "domain": "crosstalk",
                    "metadata": {},
                }
            ],
        },
    }


def _shutting_down_body() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": jsonrpc_code(ErrorKind.INTERNAL_ERROR),
            "message": "The agent shut down while this request was waiting; its outcome is unknown (ask GetTask later)",
        },
    }


async def _send_json(
    send: Any, status: int, payload: dict[str, Any], extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(extra_headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
