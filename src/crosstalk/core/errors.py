"""The root of every error crosstalk raises on purpose, the kinds of error, and the one table that says how each kind
leaves crosstalk: the CLI's exit code and the JSON-RPC error code a wire answer carries.

An error says what it means one way: its `code` (an ErrorKind), a class attribute (a few carriers, such as TaskError
and the CLI's Fail, take it per instance). Its text is `message`, one line. Each layer defines its errors in one
module: core/errors.py (this one), fs/errors.py, policy/errors.py, registry/errors.py, journal/errors.py,
harness/errors.py, ingress/errors.py, bus/errors.py; a layer with a single error keeps it beside the code that raises
it (tasks/ledger.py, capture/collect.py, shim/pool.py, cli/common.py, demo/appserver_client.py). All derive from
CrosstalkError; an error that callers also catch as OSError, ValueError, TimeoutError or RuntimeError inherits that
too (tests/unit/test_errors.py holds all of this).
"""

from __future__ import annotations

from crosstalk.core.strenum import StrEnum


class ErrorKind(StrEnum):
    """What went wrong, as the edges name it. The task kinds' values travel on the wire (a tool result's `reason`)."""

    FAILED = "failed"  # a wire or protocol error, an unknown outcome, a bus, git or file failure
    USAGE = "usage"  # the command line (or a tool's arguments) asked for something that cannot be done
    REJECTED = "rejected"  # the receiver refused the message
    NO_AGENT = "no_agent"  # no such agent, or it is unreachable
    HELD = "held"  # the receiving session holds the message for its user to decide
    UNAUTHENTICATED = "unauthenticated"  # the receiver refused the sender's bearer token
    TASK_NOT_FOUND = "task_not_found"
    TASK_NOT_CANCELABLE = "task_not_cancelable"
    UNSUPPORTED_OPERATION = "unsupported_operation"
    INVALID_REQUEST = "invalid_request"  # admission, hop guard, size: refused before any task exists
    INVALID_PARAMS = "invalid_params"  # a well-formed request whose parameters contradict the task (contextId)
    INTERNAL_ERROR = "internal_error"  # the agent could not make the message durable: nothing was accepted
    PARSE_ERROR = "parse_error"  # a body that is not JSON (or not UTF-8, or nested too deep)
    METHOD_NOT_FOUND = "method_not_found"
    NO_SUCH_MESSAGE = "no_such_message"  # a reply to a message no task holds
    NOT_AN_ASK = "not_an_ask"  # a reply to a message that asks nothing (or a reply with nothing in it)
    ALREADY_REPLIED = "already_replied"
    ASK_CLOSED = "ask_closed"  # the ask already ended (answered, failed, canceled, past its deadline)


class ErrorExit:
    """How one kind of error leaves crosstalk: `exit`, the CLI's exit code (README "Exit codes"), and `jsonrpc`, the
    JSON-RPC error code of a wire answer (MCP and A2A alike; the A2A error is the SDK's error class that carries that
    code). A plain class: `crosstalk send` imports this module at start-up, and dataclasses costs milliseconds."""

    __slots__ = ("exit", "jsonrpc")

    def __init__(self, exit: int, jsonrpc: int) -> None:
        self.exit = exit
        self.jsonrpc = jsonrpc


# JSON-RPC codes: -32700..-32600 are the protocol's own, -32001..-32004 A2A's task errors, -32000 the first of the
# implementation-defined server errors (A2A names no code for a refused token).
ERROR_TABLE: dict[ErrorKind, ErrorExit] = {
    ErrorKind.FAILED: ErrorExit(exit=1, jsonrpc=-32603),
    ErrorKind.USAGE: ErrorExit(exit=2, jsonrpc=-32602),
    ErrorKind.REJECTED: ErrorExit(exit=3, jsonrpc=-32600),
    ErrorKind.NO_AGENT: ErrorExit(exit=4, jsonrpc=-32603),
    ErrorKind.HELD: ErrorExit(exit=5, jsonrpc=-32603),
    ErrorKind.UNAUTHENTICATED: ErrorExit(exit=3, jsonrpc=-32000),
    ErrorKind.TASK_NOT_FOUND: ErrorExit(exit=1, jsonrpc=-32001),
    ErrorKind.TASK_NOT_CANCELABLE: ErrorExit(exit=1, jsonrpc=-32002),
    ErrorKind.UNSUPPORTED_OPERATION: ErrorExit(exit=1, jsonrpc=-32004),
    ErrorKind.INVALID_REQUEST: ErrorExit(exit=3, jsonrpc=-32600),
    ErrorKind.INVALID_PARAMS: ErrorExit(exit=1, jsonrpc=-32602),
    ErrorKind.INTERNAL_ERROR: ErrorExit(exit=1, jsonrpc=-32603),
    ErrorKind.PARSE_ERROR: ErrorExit(exit=1, jsonrpc=-32700),
    ErrorKind.METHOD_NOT_FOUND: ErrorExit(exit=1, jsonrpc=-32601),
    ErrorKind.NO_SUCH_MESSAGE: ErrorExit(exit=1, jsonrpc=-32603),
    ErrorKind.NOT_AN_ASK: ErrorExit(exit=1, jsonrpc=-32603),
    ErrorKind.ALREADY_REPLIED: ErrorExit(exit=1, jsonrpc=-32603),
    ErrorKind.ASK_CLOSED: ErrorExit(exit=1, jsonrpc=-32603),
}

EXIT_OK = 0  # the CLI's exit code when nothing failed (accepted or queued)


def exit_code(kind: ErrorKind) -> int:
    """The CLI's exit code for an error of this kind."""
    return ERROR_TABLE[kind].exit


def jsonrpc_code(kind: ErrorKind) -> int:
    """The JSON-RPC error code a wire answer carries for an error of this kind."""
    return ERROR_TABLE[kind].jsonrpc


class CrosstalkError(Exception):
    """Base of every error crosstalk raises on purpose. `code` says what kind it is; `message` is its one line."""

    code: ErrorKind = ErrorKind.FAILED

    @property
    def message(self) -> str:
        return str(self)


class MessageError(CrosstalkError, ValueError):
    """A message record failed validation."""

    code = ErrorKind.USAGE

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class MessageTooLarge(MessageError):
    """A message's text is over the size limit: what a receiver's admission refuses as admission:text_too_large."""

    reason = "admission:text_too_large"


class EnvelopeError(CrosstalkError, ValueError):
    """Text is not a well-formed <cross-session-message> envelope."""

    code = ErrorKind.USAGE


class UntrustedInput(CrosstalkError, ValueError):
    """Input from outside was refused: too large, too deep, or not what it must be. The message names it."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"{what}: {problem}")
        self.what = what
        self.problem = problem


class TaskError(CrosstalkError):
    """A task operation the protocol answers with an error. Its `code`, given per instance, is one of the task kinds
    below (named here too, so the task layer reads `TaskError.NOT_FOUND`)."""

    NOT_FOUND = ErrorKind.TASK_NOT_FOUND
    NOT_CANCELABLE = ErrorKind.TASK_NOT_CANCELABLE
    UNSUPPORTED = ErrorKind.UNSUPPORTED_OPERATION
    INVALID = ErrorKind.INVALID_REQUEST  # admission, hop guard, size: refused before any task exists
    INVALID_PARAMS = ErrorKind.INVALID_PARAMS  # a well-formed request whose parameters contradict the task (contextId)
    INTERNAL = ErrorKind.INTERNAL_ERROR  # the agent could not make the message durable: nothing was accepted

    def __init__(self, code: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.code = code
