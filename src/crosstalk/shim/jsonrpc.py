"""JSON-RPC 2.0 as the MCP server speaks it, pure: the error codes, building responses, and sorting one decoded
message into a request, a notification, a client's response, or an error to answer at once.

What a method means is the server's (protocol.py); here is only what makes a message well formed: an object with
`jsonrpc` "2.0" (or absent), a string `method`, an id that is a string or an integer (never a bool), and params
that are an object when present.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crosstalk.core.errors import ErrorKind, jsonrpc_code

# The codes come from the one table of error kinds (core/errors.py): JSON-RPC 2.0's own.
PARSE_ERROR = jsonrpc_code(ErrorKind.PARSE_ERROR)
INVALID_REQUEST = jsonrpc_code(ErrorKind.INVALID_REQUEST)
METHOD_NOT_FOUND = jsonrpc_code(ErrorKind.METHOD_NOT_FOUND)
INVALID_PARAMS = jsonrpc_code(ErrorKind.INVALID_PARAMS)
INTERNAL_ERROR = jsonrpc_code(ErrorKind.INTERNAL_ERROR)


@dataclass(frozen=True, slots=True)
class Request:
    rid: str | int
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: Any  # as sent: a notification is never answered, so its params are checked where it is handled


def classify(msg: Any) -> Request | Notification | dict[str, Any] | None:
    """A well-formed request or notification; else the error response to send now; None for a response from the
    client (this server sends no requests, so there is nothing to match it to)."""
    if not isinstance(msg, dict):
        return error(None, INVALID_REQUEST, "Invalid Request: not a JSON object")
    raw_id = msg.get("id")
    valid_id = isinstance(raw_id, str) or (isinstance(raw_id, int) and not isinstance(raw_id, bool))
    rid: str | int | None = raw_id if valid_id else None
    if msg.get("jsonrpc", "2.0") != "2.0":
        return error(rid, INVALID_REQUEST, "Invalid Request: jsonrpc must be '2.0'")
    method = msg.get("method")
    if method is None and ("result" in msg or "error" in msg):
        return None
    if not isinstance(method, str):
        return error(rid, INVALID_REQUEST, "Invalid Request: method must be a string")
    params = msg.get("params")
    if "id" not in msg:
        return Notification(method, params)
    if rid is None:
        return error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    if params is not None and not isinstance(params, dict):
        return error(rid, INVALID_PARAMS, "Invalid params: params must be an object")
    return Request(rid, method, params or {})


def result(rid: str | int, body: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": body}


def error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": body}
