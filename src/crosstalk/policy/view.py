"""What the receiving agent knows about itself when it judges an inbound message."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from crosstalk.policy.roles import DEFAULT_ACCEPT_FROM, Role


@dataclass(frozen=True, slots=True)
class ReceiverView:
    agent_id: str
    name: str
    role: Role = Role.PRIMARY
    owner: str | None = None  # agent_id of the parent (the claimer); None unless claimed
    children: frozenset[str] = field(default_factory=frozenset)  # agent_ids this agent owns
    peers: frozenset[str] = field(default_factory=frozenset)  # agent_ids or names on its peer list
    # None = the role's defaults. Entries: bucket names or explicit handles (name, agent_id, @scheme:topic).
    accept_from: frozenset[str] | None = None

    def __post_init__(self) -> None:
        # Callers often hold sets or lists; freeze them so the view stays hashable and cannot change under us.
        object.__setattr__(self, "role", Role(self.role))
        object.__setattr__(self, "children", _freeze(self.children))
        object.__setattr__(self, "peers", _freeze(self.peers))
        if self.accept_from is not None:
            object.__setattr__(self, "accept_from", _freeze(self.accept_from))

    def effective_accept_from(self) -> frozenset[str]:
        """The acceptFrom in force: the explicit list if set, else the role's default buckets (as names)."""
        if self.accept_from is not None:
            return self.accept_from
        return frozenset(b.value for b in DEFAULT_ACCEPT_FROM[self.role])


def _freeze(values: Iterable[str]) -> frozenset[str]:
    return values if isinstance(values, frozenset) else frozenset(values)
