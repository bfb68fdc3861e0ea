"""Errors the A2A client raises besides TaskError. Pure: importing this module never loads the SDK."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError


class A2AUnreachable(CrosstalkError):
    """The agent could not be reached: nothing was delivered (connection refused, DNS, TLS, closed client)."""


class A2AOutcomeUnknown(A2AUnreachable):
    """The request left but no answer came back (timeout, connection dropped mid-request): the message may or may
    not have been accepted. Ask again with GetTask, or resend with the same message_id (the receiver dedupes)."""


class A2AAuthError(CrosstalkError):
    """The agent refused our bearer token (HTTP 401/403)."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


class A2AProtocolError(CrosstalkError):
    """The agent answered, but with an error crosstalk has no task-level meaning for (wrong version, method not
    found, internal error, a malformed response, an unexpected HTTP status)."""

    def __init__(self, message: str, code: int | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code  # the JSON-RPC error code, when there was one
        self.status = status  # the HTTP status, when that was the problem
