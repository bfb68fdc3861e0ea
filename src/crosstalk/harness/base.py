"""The harness seam (docs/dev/harness-seam.md): everything harness-specific lives behind it, in two parts.

- A **harness kind** (`HarnessKind`, one object per harness, registered in `crosstalk/harness/__init__.py`) knows the
  harness as a whole: who a tool call comes from (`identify`), which sessions exist (`discover`), whether a session was
  superseded (`superseded`), whether it follows session renames, and how to make the adapter for one agent.
- A **per-agent adapter** (`HarnessAdapter`) serves one agent: `bind` to its session, `inject` a message, `status`,
  `render`, `native_reply_address`, `close`.

The receiver chain knows only this file and the layer's errors. An adapter either returns an `InjectResult` or raises
one of the typed errors in `crosstalk.harness.errors`; the chain's injector maps each to exactly one delivery state, so
every adapter fails the same way. A harness package imports `crosstalk.core`, `crosstalk.fs`, this module, the errors
module and itself, nothing else (tests/unit/test_layering.py holds it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from crosstalk.core import envelope
from crosstalk.core.kinds import Delivery
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.core.tasks import Artifact

INJECT_STATES = frozenset({State.ACCEPTED, State.QUEUED, State.HELD, State.UNREACHABLE, State.UNKNOWN})


# ---------------------------------------------------------------------------------------------------- the kind side
@dataclass(frozen=True, slots=True)
class CallEvidence:
    """What one tool call carries that may identify its session: the call's `_meta`, the pid of the process that
    started the shim (a Claude session), and the shim's environment (where each harness keeps its state)."""

    meta: Mapping[str, Any] = field(default_factory=dict)
    parent_pid: int = 0
    environ: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SessionIdentity:
    """The calling session, as its harness proved it for one call."""

    harness: str  # a registered kind's name (never "auto")
    session_ref: str
    preferred_name: str | None = None  # the session's own name, if the harness gives one
    harness_pid: int | None = None  # the session's process, where the harness has one per session (Claude)

    @property
    def key(self) -> tuple[str, str]:
        return (self.harness, self.session_ref)


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session the harness knows about, with or without crosstalk (`discover`)."""

    harness: str
    session_ref: str
    name: str  # the session's own name, else one its kind derives (a listing shows it, a send addresses it)
    cwd: str | None
    status: str  # idle | busy | unknown (the harness's own word for it)
    reachable: bool  # whether a message could be put into it now
    reason: str | None = None  # why not, when not reachable
    pid: int | None = None
    endpoint: str | None = None  # where its harness takes input (Claude: the messaging socket)


@runtime_checkable
class HarnessKind(Protocol):
    """One harness as a whole (registered in crosstalk/harness/__init__.py). `follows_renames`: a session's
    preferred name may change while it lives, and its agent follows it (Claude `/rename`)."""

    name: str
    follows_renames: bool

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        """The session this call comes from, from the call's own evidence; None without evidence."""
        ...

    def discover(self, environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
        """The live sessions of this harness on this machine (missing evidence: not listed). `known_endpoints`:
        where this harness's crosstalk agents are bound (from their descriptors), for a kind that asks endpoints."""
        ...

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        """True only with the harness's proof that `old` ended and `new` took its place (Claude `/clear`)."""
        ...

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> HarnessAdapter:
        """A new adapter for the agent of `session`."""
        ...


@runtime_checkable
class NativeDelivery(Protocol):
    """Optional, for a kind whose sessions can be written to without crosstalk serving them (a Claude session
    started without it): the sender's side writes the message as the harness's own peers do. Inform only."""

    def deliver_native(
        self,
        row: SessionRow,
        text: str,
        *,
        from_name: str,
        sender_pid: int | None,
        environ: Mapping[str, str],
        message_id: str | None = None,
        on_settled: Callable[[str, InjectResult], None] | None = None,
    ) -> InjectResult:
        """`held`: the session holds it for its user; `on_settled(message_id, result)` then gets the final word
        (on another thread) for as long as this process lives."""
        ...


@runtime_checkable
class PeerPublisher(Protocol):
    """Optional, for a kind whose own sessions can list and message other programs as peers (Claude's ListAgents
    and SendMessage): publish a crosstalk agent of another harness as such a peer, with `settings` from the opt-in
    (`crosstalk install NAME --native-peers`); `token` is the agent's socket key, which the harness's sessions then
    present. Returns how to unpublish it, or None when it was not published."""

    def peer_settings(self, environ: Mapping[str, str]) -> dict[str, str]:
        """What the opt-in records, from the user's environment (where this harness keeps its sessions)."""
        ...

    def publish_peer(self, agent: AgentInfo, token: str, settings: Mapping[str, str]) -> Callable[[], None] | None: ...


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One file an install or uninstall touched (or found as it should be)."""

    path: str
    action: str  # created | updated | unchanged | restored (byte for byte) | removed | absent | kept


@runtime_checkable
class Installable(Protocol):
    """Optional, for a kind that `crosstalk install NAME` can set up: register `command` (the absolute argv of
    `crosstalk mcp`) with the harness in `scope`, idempotently, and undo it. `extra_env`: what the shim must be
    started with to find the user's crosstalk state (for a harness that filters its MCP children's environment)."""

    @property
    def scopes(self) -> tuple[str, ...]: ...  # a property: a kind may load its install module only when asked

    def install(
        self,
        scope: str,
        command: list[str],
        environ: Mapping[str, str],
        cwd: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[ConfigChange]: ...

    def uninstall(self, scope: str, environ: Mapping[str, str], cwd: str) -> list[ConfigChange]: ...


# --------------------------------------------------------------------------------------------------- the agent side
@dataclass(frozen=True, slots=True)
class AgentInfo:
    """What an adapter may know about the agent it serves."""

    agent_id: str
    name: str
    session_ref: str
    uds_path: str
    cwd: str
    # The harness endpoints other live agents of this harness are bound to (their descriptors record them): a
    # session may be reachable at one of them (a Codex app-server on a socket of its own).
    known_endpoints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class InjectRequest:
    message: Message
    sender: Sender
    delivery: Delivery
    reply_address: str | None = None  # where a native reply would go (Claude: our uds path)
    meta: bool = False  # kind meta: context that must never start a turn
    bucket: str | None = None  # where the receiver's policy placed the sender (parent, children, peers, agents, …)


@dataclass(frozen=True, slots=True)
class InjectResult:
    """`held`: the harness took the message but holds it for its user; the adapter settles it later through the
    sink it was given (`SettlesLater`), with one of core.states.LATE_STATES."""

    state: State  # accepted | queued | held | unreachable | unknown
    reason: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


LateSink = Callable[[str, InjectResult], None]


@runtime_checkable
class SettlesLater(Protocol):
    """Optional, for an adapter whose harness may answer an injection `held` and say later what its user did (Claude
    Code's hold receipts). The chain gives the adapter its sink once; the adapter calls `sink(message_id, result)`
    on the event loop, once per held message, with the final word (accepted, rejected, unreachable, unknown). A
    result for a message it answered accepted means the harness contradicted it (held or refused after all). An
    adapter with `settles_queued = True` (Gemini: its hook hands a queued message over later) settles its `queued`
    answers the same way."""

    def on_settled(self, sink: LateSink) -> None: ...


@dataclass(frozen=True, slots=True)
class BindResult:
    """What bind learned. It is published in the agent's descriptor: `inbound_reachable` and `reason` are what
    list_agents and `crosstalk list` show as the agent's reachability."""

    endpoint: str | None = None  # harness endpoint the agent is bound to (Codex app-server, Claude socket)
    version: str | None = None
    inbound_reachable: bool = True
    reason: str | None = None  # why inbound delivery cannot work, when it cannot


@runtime_checkable
class HarnessAdapter(Protocol):
    """One agent's connection to its session."""

    name: str  # the kind's name

    async def bind(self, agent: AgentInfo) -> BindResult: ...

    async def inject(self, request: InjectRequest) -> InjectResult: ...

    def status(self) -> str:
        """idle | busy | unknown: the session as the adapter last saw it."""
        ...

    def render(self, request: InjectRequest) -> str:
        """The text the model will see for this message."""
        ...

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        """Where the session's own native reply to an injected message would go (the envelope's `from`), or None."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class SessionOps:
    """How a session answers what it received, as its model would through the reply tool. The agent hands these to
    an adapter that plays its session's model itself (`SessionModel`: the fake's scripted answers and conformance
    profile). Refusals (the task moved on) are logged by the agent, never raised into the adapter."""

    answer: Callable[[str, str], Awaitable[object]]  # (message_id, text): the reply tool's path
    reply: Callable[[str, str, tuple[Artifact, ...], bool], Awaitable[object]]  # (message_id, text, artifacts, direct)
    expect_answer: Callable[[str], bool]  # the session will answer this message: delivery does not complete it
    require_input: Callable[[str, str], Awaitable[object]]  # (message_id, question)


@runtime_checkable
class SessionModel(Protocol):
    """Optional, for an adapter whose "session" is scripted in-process (the fake): it answers through `ops`."""

    def attach_session(self, ops: SessionOps) -> None: ...


def derived_name(harness: str, session_ref: str) -> str:
    """The name of a session its harness gives none: `<harness>-<last 8 hex of its id>` (the tail: the head of a
    time-ordered id is only its start time, shared by sessions started together)."""
    return f"{harness}-{session_ref.replace('-', '')[-8:]}"


def render_envelope(request: InjectRequest) -> str:
    """The <cross-session-message> envelope for an inbound message. Attributes are rebuilt from the verified
    sender, never copied from whatever envelope the sender wrapped its text in."""
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
