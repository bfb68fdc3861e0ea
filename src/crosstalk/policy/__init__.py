"""Policy: sender buckets, roles and ACLs, the kind table, claims, admission and the hop guard.

Pure functions over crosstalk.core records, no I/O. Every check returns None to accept, or a short
reason string ("acl:<bucket>", "kind:...", "admission:...", "hop:...") to reject.
A rejected message is never injected.

Nothing is imported eagerly: a name is loaded from its submodule on first use (`__getattr__`), so `crosstalk send`,
which needs only policy/transport.py, does not pay for the rest (the records in view.py and admission.py are
dataclasses, and importing dataclasses costs ~16 ms on that start-up path).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
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

# Each exported name -> the submodule that defines it.
_WHERE = {
    "check_acl": "acl",
    "sender_handles": "acl",
    "Limits": "admission",
    "Load": "admission",
    "check_admission": "admission",
    "CLAIMER_ROLES": "claims",
    "ClaimState": "claims",
    "claim": "claims",
    "release": "claims",
    "classify": "classify",
    "Decision": "decide",
    "evaluate": "decide",
    "ClaimError": "errors",
    "PolicyError": "errors",
    "MAX_HOPS": "hop",
    "check_hops": "hop",
    "check_kind": "kinds",
    "BUCKET_NAMES": "roles",
    "DEFAULT_ACCEPT_FROM": "roles",
    "Bucket": "roles",
    "Role": "roles",
    "parse_role": "roles",
    "UDS_KINDS": "transport",
    "UDS_TRANSPORT": "transport",
    "check_transport": "transport",
    "ReceiverView": "view",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


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
