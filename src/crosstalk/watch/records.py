"""What `crosstalk watch` shows, as frozen records: one per agent, per message and per transport, and the snapshot
that holds them. `to_json` is the documented `crosstalk watch --once --json` shape (docs/watch.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SNAPSHOT_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentView:
    """One live agent: who it is, whether a message can reach its session, and what waits in its mailbox."""

    name: str
    agent_id: str
    harness: str
    role: str
    owner: str | None  # the claiming parent's agent_id
    owner_name: str | None  # its name, when that parent is live
    pid: int
    cwd: str
    reachable: bool
    reason: str | None  # why not, when unreachable (the words `crosstalk list` and list_agents use)
    open_asks: int  # asks delivered to this agent that it still owes a reply
    asks_waiting: int  # asks this agent sent that await their answer
    unread: int  # mailbox entries that still need the session's attention (receive_message's default view)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteAgentView:
    """A live agent of another machine on the relay, as that machine announced it (relay/presence.py)."""

    name: str  # NAME@ALIAS
    machine: str
    harness: str
    reachable: bool
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageView:
    """One inbound message as its receiver's journal knows it."""

    message_id: str
    at: float  # epoch seconds the receiver journaled it
    to: str  # the receiving agent's name
    to_agent_id: str
    sender: str  # a name, an agent_id, or a handle such as @cli:alice
    sender_class: str  # verified, external, unverified, ...
    kind: str
    state: str  # a delivery state (crosstalk.core.states.State), or "rejected"
    reason: str | None
    latency_s: float | None  # journaled -> first delivery outcome; None while there is none
    transport: str  # uds or a2a
    text: str  # the first line, cut to PREVIEW_CHARS

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        return {("from" if k == "sender" else k): v for k, v in out.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportView:
    """One bus transport known on this machine and its dispatcher here, from the heartbeat it writes."""

    name: str
    root: str
    alias: str | None
    problem: str | None  # the transport is missing or of another protocol version
    running: bool  # the dispatcher holds its lock
    pid: int | None
    heartbeat_age_s: float | None  # seconds since heartbeat.json was written; None when never
    last_tick_at: float | None
    interval: float | None  # seconds between idle ticks
    halted: str | None
    cursor: str | None  # the last commit dispatched
    head: str | None  # the work tree's HEAD
    unscanned_commits: int | None  # commits after the cursor not dispatched yet (None: unknown)
    held: int  # bus messages held for live agents here that are down
    dispatched: int
    failed: int
    errors: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    taken_at: float
    state_root: str
    agents: tuple[AgentView, ...]
    messages: tuple[MessageView, ...]  # oldest first, the newest MAX_MESSAGES
    transports: tuple[TransportView, ...]
    remote_agents: tuple[RemoteAgentView, ...] = ()  # other machines' agents, when this one joined a relay

    def to_json(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "taken_at": self.taken_at,
            "state_root": self.state_root,
            "agents": [a.to_json() for a in self.agents],
            "messages": [m.to_json() for m in self.messages],
            "transports": [t.to_json() for t in self.transports],
            "remote_agents": [a.to_json() for a in self.remote_agents],
        }
