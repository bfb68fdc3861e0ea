"""Roles, ACL buckets and each role's default acceptFrom: which buckets of senders an agent listens to."""

from __future__ import annotations

from crosstalk.core.strenum import StrEnum
from crosstalk.policy.errors import PolicyError


class Role(StrEnum):
    PRIMARY = "primary"  # every agent's role until claimed; accepts every bucket but unknown
    ORCHESTRATOR = "orchestrator"  # runs workers, talks to peers and external triggers
    WORKER = "worker"  # claimed (or configured) under a parent; listens to the parent only by default
    PEER = "peer"  # a top-level agent that gossips with its peer list


class Bucket(StrEnum):
    """Where a sender stands as seen from the receiver; every inbound lands in exactly one."""

    PARENT = "parent"  # the receiver's owner (the agent that claimed it)
    CHILDREN = "children"  # agents the receiver owns
    PEERS = "peers"  # agents on the receiver's peer list
    AGENTS = "agents"  # any other verified agent
    EXTERNAL = "external"  # unverified but named @scheme:topic (CI, cron, hooks)
    UNKNOWN = "unknown"  # unverified and unnamed: usually denied


# Every role is listed; a new role must choose its defaults here on purpose.
DEFAULT_ACCEPT_FROM: dict[Role, frozenset[Bucket]] = {
    Role.PRIMARY: frozenset(Bucket) - {Bucket.UNKNOWN},
    Role.ORCHESTRATOR: frozenset({Bucket.CHILDREN, Bucket.EXTERNAL, Bucket.PEERS}),
    Role.WORKER: frozenset({Bucket.PARENT}),  # a worker opts in to external explicitly
    Role.PEER: frozenset({Bucket.PEERS, Bucket.EXTERNAL}),
}

BUCKET_NAMES: frozenset[str] = frozenset(b.value for b in Bucket)


def parse_role(value: str) -> Role:
    """Exact lowercase names only: "Worker" or " worker " is invalid, not a guess at worker."""
    try:
        return Role(value)
    except ValueError:
        allowed = ", ".join(r.value for r in Role)
        raise PolicyError(f"role: unknown role {value!r} (expected one of: {allowed})") from None
