"""What the chain is handed and what it knows about its agent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.policy.notices import NOTICE_TRANSPORT

__all__ = ["NOTICE_TRANSPORT", "AgentIdentity", "ChainStats", "Inbound"]

# NOTICE_TRANSPORT: crosstalk's own notices to its agent's session (claim changes, bounces). No ingress can carry
# it: an Inbound with it is built in-process only (policy/notices.py).


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message as an ingress hands it to the chain: the record plus what the transport proved."""

    message: Message
    sender: Sender
    transport: str  # uds | a2a | bus | crosstalk (a notice)
    native: bool = False  # a harness-native frame or a notice: fresh id, exempt from dedupe, no chain to check
    new_task: bool = False  # opens a new A2A task (counts against the pending-task limit)
    default_wait: bool = False  # the sender blocks until a terminal state (counts against the wait limit)


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    agent_id: str
    name: str
    hop_entry: str
    binding: dict[str, Any]
    reply_address: str | None = None


@dataclass(slots=True)
class ChainStats:
    received: int = 0
    rejected: int = 0
    duplicates: int = 0
    injected: int = 0
    by_state: dict[str, int] = field(default_factory=dict)
