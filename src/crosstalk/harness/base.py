"""The Harness protocol (ARCHITECTURE.md §8): everything harness-specific lives behind it.

The receiver chain knows only this file. An adapter either returns an `InjectResult` or raises one of the
typed errors below; the chain's injector maps each to a delivery state, so every adapter fails the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from crosstalk.core.kinds import Delivery
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import State

INJECT_STATES = frozenset({State.ACCEPTED, State.QUEUED, State.UNREACHABLE, State.UNKNOWN})


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """What an adapter may know about the agent it serves."""

    agent_id: str
    name: str
    session_ref: str
    uds_path: str
    cwd: str


@dataclass(frozen=True, slots=True)
class InjectRequest:
    message: Message
    sender: Sender
    delivery: Delivery
    reply_address: str | None = None  # where a native reply would go (Claude: our uds path)
    meta: bool = False  # kind meta: context that must never start a turn


@dataclass(frozen=True, slots=True)
class InjectResult:
    state: State  # accepted | queued | unreachable | unknown
    reason: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BindResult:
    endpoint: str | None = None  # harness endpoint the agent is bound to (Codex app-server, Claude socket)
    version: str | None = None
    inbound_reachable: bool = True
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session the harness knows about, for list_agents/discovery."""

    harness: str
    session_ref: str
    name: str | None
    cwd: str | None
    status: str
    reachable: bool


class HarnessError(Exception):
    """Base of adapter failures. The injector maps each subclass to a delivery state."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HarnessRefused(HarnessError):
    """The harness definitely refused the input; nothing reached the session (→ unreachable)."""


class PreSendFailure(HarnessError):
    """The adapter failed before writing anything (no connection, no binding) (→ unreachable)."""


class HarnessDisconnected(HarnessError):
    """The connection broke after the write may have landed (→ unknown; never resent)."""


@runtime_checkable
class Harness(Protocol):
    name: str

    def identify(self, request: Mapping[str, Any]) -> str | None:
        """The session_ref a request (e.g. an MCP tools/call) comes from, or None without evidence."""
        ...

    async def bind(self, agent: AgentInfo) -> BindResult: ...

    def discover(self) -> list[SessionRow]: ...

    async def inject(self, request: InjectRequest) -> InjectResult: ...

    def status(self) -> str: ...

    def render(self, request: InjectRequest) -> str:
        """The text the model will see for this message."""
        ...

    def native_reply_address(self, agent: AgentInfo) -> str | None: ...

    async def close(self) -> None: ...


@runtime_checkable
class Supersession(Protocol):
    """Optional: a harness that can prove a session ended while its connection lives on (Claude /clear)."""

    def superseded(self, agent: AgentInfo) -> bool: ...


def render_envelope(request: InjectRequest) -> str:
    """The <cross-session-message> envelope for an inbound message. Attributes are rebuilt from the verified
    sender, never copied from whatever envelope the sender wrapped its text in."""
    from crosstalk.core import envelope
    from crosstalk.core.sender import SenderClass

    msg, sender = request.message, request.sender
    return envelope.render(
        msg.text,
        {
            "from": f"uds:{request.reply_address}" if request.reply_address else None,
            "from-name": sender.label,
            "sender-class": sender.sender_class.value if sender.sender_class is not SenderClass.VERIFIED else None,
            "message-id": msg.message_id,
            "kind": msg.kind.value,
            "in-reply-to": msg.in_reply_to,
        },
    )
