"""Who sent an inbound message, as the transport proves it (never as the envelope claims)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from crosstalk.core.ids import is_external_tag as is_external_tag
from crosstalk.core.strenum import StrEnum

# An external sender's tag, @scheme:topic: the rule core/ids.py's is_external_tag checks without `re` (tests hold
# the two to the same answer).
EXTERNAL_TAG_RE = re.compile(r"^@[A-Za-z0-9][A-Za-z0-9._-]*:[^\s]+\Z")

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class SenderClass(StrEnum):
    VERIFIED = "verified"  # SO_PEERCRED pid + start time matched one descriptor, or an A2A bearer token
    UNVERIFIED = "unverified"  # a same-user process not matched to a registered agent
    EXTERNAL = "external"  # unverified and named @scheme:topic (e.g. crosstalk send --from @ci:build)


@dataclass(frozen=True, slots=True)
class Sender:
    sender_class: SenderClass
    agent_id: str | None = None  # set only when verified
    name: str | None = None  # verified: the descriptor's name; otherwise the claimed tag, for display
    transport: str = "uds"

    @property
    def dedupe_key(self) -> str:
        """The sender half of the dedupe key: the verified agent, else the claimed tag under its class."""
        if self.sender_class is SenderClass.VERIFIED and self.agent_id:
            return f"agent:{self.agent_id}"
        return f"{self.sender_class.value}:{self.name or '-'}"

    @property
    def label(self) -> str:
        if self.sender_class is SenderClass.VERIFIED:
            return self.name or self.agent_id or "?"
        if self.sender_class is SenderClass.EXTERNAL:
            return self.name or "@unknown"
        return f"{self.name or 'anonymous'} (unverified)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.sender_class.value,
            "agent_id": self.agent_id,
            "name": self.name,
            "transport": self.transport,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sender:
        return cls(
            sender_class=SenderClass(data["class"]),
            agent_id=data.get("agent_id"),
            name=data.get("name"),
            transport=data.get("transport", "uds"),
        )

    @classmethod
    def unverified(cls, claimed_from: str | None, transport: str = "uds") -> Sender:
        """Class an unmatched sender by its claimed tag: @scheme:topic is external, anything else unverified."""
        if is_external_tag(claimed_from):
            return cls(SenderClass.EXTERNAL, None, claimed_from, transport)
        return cls(SenderClass.UNVERIFIED, None, claimed_from or None, transport)
