"""The harness layer's errors: an install that could not change a harness's configuration, an adapter that could not
deliver (the receiver maps each to a delivery state), and the failures of the connections adapters hold (Codex's
app-server, pi's extension link)."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError, ErrorKind


class InstallError(CrosstalkError):
    """A harness's configuration could not be changed; nothing was written. Names the file and the fix."""


class HarnessError(CrosstalkError):
    """Base of adapter failures. The injector maps each subclass to a delivery state."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HarnessRefused(HarnessError):
    """The harness definitely refused the input; nothing reached the session (→ unreachable)."""

    code = ErrorKind.NO_AGENT


class PreSendFailure(HarnessError):
    """The adapter failed before writing anything (no connection, no binding) (→ unreachable)."""

    code = ErrorKind.NO_AGENT


class HarnessDisconnected(HarnessError):
    """The connection broke after the write may have landed (→ unknown; never resent)."""


class ReceiverRefused(HarnessError):
    """The receiving session's own user settings refuse the message (Claude's `crossSessionInbound: refuse`);
    nothing reached the session (→ rejected, the reason naming the setting)."""

    code = ErrorKind.REJECTED


class AppServerError(CrosstalkError):
    """The app-server answered a request with a JSON-RPC error (a definite refusal)."""

    def __init__(self, method: str, error: object) -> None:
        super().__init__(f"{method}: {error}")
        self.error = error


class AppServerGone(CrosstalkError):
    """No connection, or it broke: `sent` says whether the request may have reached the server."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class DeadlinePassed(CrosstalkError, TimeoutError):
    """The overall deadline of a discovery or a delivery passed."""


class LinkClosed(CrosstalkError):
    """The extension is gone (its end of the pipe closed)."""
