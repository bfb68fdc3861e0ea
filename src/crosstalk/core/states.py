"""Delivery states and the outcome every ingress encodes into its own wire answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class State(StrEnum):
    # Answers a sender can get.
    ACCEPTED = "accepted"  # injected with harness evidence
    QUEUED = "queued"  # verified no-wake hand-off; the model sees it on its next request
    HELD = "held"  # the harness took it and holds it for the receiving user; a final state follows
    REJECTED = "rejected"  # policy, auth, admission, hop or kind failure; never injected
    UNREACHABLE = "unreachable"  # definite refusal or pre-send failure; nothing reached the session
    UNKNOWN = "unknown"  # ambiguous failure after the dispatch claim; never resent
    # Mailbox-only states (receive_message), never a send answer.
    RECOVERED = "recovered"  # journaled before a crash, never dispatched; surfaced, not injected
    BOUNCED = "bounced"  # a native reply the agent bounced back to its own session
    # Journal-internal states.
    SUBMITTED = "submitted"  # journaled, not yet claimed for dispatch
    DISPATCHING = "dispatching"  # claimed for dispatch; the harness write may be under way


SEND_STATES = frozenset({State.ACCEPTED, State.QUEUED, State.HELD, State.REJECTED, State.UNREACHABLE, State.UNKNOWN})
DELIVERED_STATES = frozenset({State.ACCEPTED, State.QUEUED})
# A held message settles later, once the harness says what its user did: accepted (delivered), rejected (denied,
# refused), unreachable (expired, dropped) or unknown (its word can no longer reach us).
LATE_STATES = frozenset({State.ACCEPTED, State.REJECTED, State.UNREACHABLE, State.UNKNOWN})
UNRESOLVED_STATES = frozenset({State.SUBMITTED, State.DISPATCHING, State.HELD, State.UNKNOWN, State.RECOVERED})


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the receiver chain answers for one inbound message."""

    message_id: str
    state: State
    reason: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message_id": self.message_id, "state": self.state.value}
        if self.reason:
            out["reason"] = self.reason
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out
