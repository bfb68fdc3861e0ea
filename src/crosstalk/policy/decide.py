"""The whole policy step in one call: hop guard → classify → acl → kind table → admission."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crosstalk.core.kinds import Kind
from crosstalk.core.sender import Sender
from crosstalk.policy.acl import check_acl
from crosstalk.policy.admission import Limits, Load, check_admission
from crosstalk.policy.classify import classify
from crosstalk.policy.errors import PolicyError
from crosstalk.policy.hop import check_hops
from crosstalk.policy.kinds import check_kind
from crosstalk.policy.notices import check_notice, is_own_notice
from crosstalk.policy.roles import Bucket
from crosstalk.policy.view import ReceiverView


@dataclass(frozen=True, slots=True)
class Decision:
    ok: bool
    reason: str | None  # None exactly when ok; otherwise the first failing check's reason
    bucket: Bucket  # always set, so a rejection can still be rendered and journaled by bucket

    def __post_init__(self) -> None:
        if self.ok != (self.reason is None):
            raise PolicyError(f"decision: ok={self.ok} does not fit reason {self.reason!r}")


def evaluate(
    *,
    kind: Kind,
    text_bytes: int,
    sender: Sender,
    view: ReceiverView,
    transport: str,
    hop_chain: Sequence[str],
    self_entry: str,
    load: Load,
    limits: Limits,
    new_task: bool,
    default_wait: bool,
) -> Decision:
    """First failure wins. Admission runs last so a message refused for who sent it never counts as load."""
    # Classifying cannot fail and costs nothing, so do it up front: every Decision carries a bucket.
    bucket = classify(sender, view)
    if is_own_notice(sender, view, transport):
        # No ACL, no load: a notice is about work already accepted. Its size is still capped.
        size = check_admission(kind, text_bytes, Load(), limits, new_task=False, default_wait=False)
        return _decision(check_notice(kind) or size, bucket)
    reason = (
        check_hops(hop_chain, self_entry)
        or check_acl(sender, bucket, view)
        or check_kind(kind, bucket, sender, view, transport)
        or check_admission(kind, text_bytes, load, limits, new_task=new_task, default_wait=default_wait)
    )
    return _decision(reason, bucket)


def _decision(reason: str | None, bucket: Bucket) -> Decision:
    return Decision(ok=reason is None, reason=reason, bucket=bucket)
