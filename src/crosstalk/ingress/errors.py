"""The ingress layer's errors: a socket frame that is not valid, a delivery that failed on the way to an agent, the A2A
client's failures besides TaskError, and an A2A server that could not start. Pure: importing this module never loads
the SDK."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError, ErrorKind


class FrameError(CrosstalkError):
    """A line on the socket is not a valid frame. The message names what is wrong."""


class DeliveryError(CrosstalkError):
    """A message could not be handed to an agent (the sending side of the uds or A2A ingress)."""


class AgentUnreachable(DeliveryError):
    """Nothing listens on the agent's socket (it stopped, or never started)."""

    code = ErrorKind.NO_AGENT


class WireError(DeliveryError):
    """The connection broke or the answer was not a valid frame."""


class KeptUnreachable(AgentUnreachable):
    """Nothing was sent on a kept task-frame connection: no socket, or the connection was refused."""


class KeptBroken(WireError):
    """A kept task-frame connection failed after the frame may have left (`sent`), or before an answer came."""

    def __init__(self, text: str, *, sent: bool) -> None:
        super().__init__(text)
        self.sent = sent
        self.reused = False  # on a connection that had carried a frame before: the peer may have dropped it


class A2ARefused(DeliveryError):
    """The receiver refused the sender's bearer token."""

    code = ErrorKind.UNAUTHENTICATED


class A2AUnreachable(CrosstalkError):
    """The agent could not be reached: nothing was delivered (connection refused, DNS, TLS, closed client)."""

    code = ErrorKind.NO_AGENT


class A2AOutcomeUnknown(A2AUnreachable):
    """The request left but no answer came back (timeout, connection dropped mid-request): the message may or may
    not have been accepted. Ask again with GetTask, or resend with the same message_id (the receiver dedupes)."""

    code = ErrorKind.FAILED


class A2AAuthError(CrosstalkError):
    """The agent refused our bearer token (HTTP 401/403)."""

    code = ErrorKind.UNAUTHENTICATED

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


class A2AProtocolError(CrosstalkError):
    """The agent answered, but with an error crosstalk has no task-level meaning for (wrong version, method not
    found, internal error, a malformed response, an unexpected HTTP status)."""

    def __init__(self, message: str, jsonrpc_code: int | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.jsonrpc_code = jsonrpc_code  # the JSON-RPC error code the agent answered, when there was one
        self.status = status  # the HTTP status, when that was the problem


class TaskFramesUnsupported(A2AProtocolError):
    """The agent answered a task frame (ingress/task_frames.py) that it does not know them (an older crosstalk):
    nothing was received, so the same request may go over A2A."""


class A2AServerError(CrosstalkError):
    """The A2A server could not start."""
