"""Policy: sender buckets, roles and ACLs, the kind table, claims, admission and the hop guard.

Pure functions over crosstalk.core records, no I/O. Every check returns None to accept, or a short
reason string ("acl:<bucket>", "kind:...", "admission:...", "hop:...") to reject.
A rejected message is never injected.
"""

from crosstalk.policy.acl import check_acl, sender_handles
from crosstalk.policy.admission import Limits, Load, check_admission
from crosstalk.policy.claims import CLAIMER_ROLES, ClaimState, claim, release
from crosstalk.policy.classify import classify
from crosstalk.policy.decide import Decision, evaluate
from crosstalk.policy.errors import ClaimError, PolicyError
from crosstalk.policy.hop import MAX_HOPS, check_hops
from crosstalk.policy.kinds import check_kind
from crosstalk.policy.roles import BUCKET_NAMES, DEFAULT_ACCEPT_FROM, Bucket, Role, parse_role
from crosstalk.policy.transport import UDS_KINDS, UDS_TRANSPORT, check_transport
from crosstalk.policy.view import ReceiverView

__all__ = [
    "BUCKET_NAMES",
    "CLAIMER_ROLES",
    "DEFAULT_ACCEPT_FROM",
    "MAX_HOPS",
    "UDS_KINDS",
    "UDS_TRANSPORT",
    "Bucket",
    "ClaimError",
    "ClaimState",
    "Decision",
    "Limits",
    "Load",
    "PolicyError",
    "ReceiverView",
    "Role",
    "check_acl",
    "check_admission",
    "check_hops",
    "check_kind",
    "check_transport",
    "claim",
    "classify",
    "evaluate",
    "parse_role",
    "release",
    "sender_handles",
]
