"""claim / release transitions: who may take an agent as a worker and give it back. Pure: the caller journals them."""

from __future__ import annotations

from dataclasses import dataclass

from crosstalk.policy.errors import ClaimError, PolicyError
from crosstalk.policy.roles import Role

# Roles that may take ownership of another agent. A worker may not: it would let work flow down a chain its
# own parent never approved, and (with owner-before-claim) it is what keeps ownership free of cycles.
CLAIMER_ROLES: frozenset[Role] = frozenset({Role.PRIMARY, Role.ORCHESTRATOR, Role.PEER})


@dataclass(frozen=True, slots=True)
class ClaimState:
    """An agent's role and owner: the only two things claim and release change."""

    role: Role = Role.PRIMARY
    owner: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", Role(self.role))
        # Owner and worker go together: a worker without an owner could be commanded by no one, and an owner
        # on a non-worker would make a parent bucket whose commands the kind table refuses.
        if (self.owner is not None) != (self.role is Role.WORKER):
            raise PolicyError(f"claim state: owner {self.owner!r} does not fit role {self.role.value}")


def claim(state: ClaimState, *, target_id: str, claimer_id: str, claimer_role: Role) -> ClaimState:
    """The target becomes a worker owned by the claimer."""
    if target_id == claimer_id:
        raise ClaimError("self_claim", f"agent {target_id} cannot claim itself")
    if state.owner is not None:
        raise ClaimError("already_claimed", f"agent {target_id} is already claimed by {state.owner}")
    if claimer_role not in CLAIMER_ROLES:
        detail = f"agent {claimer_id} is a {claimer_role.value} and cannot claim"
        raise ClaimError("worker_cannot_claim", detail)
    return ClaimState(role=Role.WORKER, owner=claimer_id)


def release(state: ClaimState, *, target_id: str, requester_id: str) -> ClaimState:
    """Only the owner releases; the target returns to primary with no owner."""
    if target_id == requester_id:
        raise ClaimError("self_release", f"agent {target_id} cannot release itself")
    if state.owner is None:
        raise ClaimError("not_claimed", f"agent {target_id} is not claimed")
    if requester_id != state.owner:
        raise ClaimError("not_owner", f"agent {target_id} is owned by {state.owner}, not {requester_id}")
    return ClaimState(role=Role.PRIMARY, owner=None)
