"""The acceptFrom check: does the receiver listen to this bucket, or to this sender by handle?"""

from __future__ import annotations

from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy.roles import BUCKET_NAMES, Bucket
from crosstalk.policy.view import ReceiverView


def sender_handles(sender: Sender) -> frozenset[str]:
    """The handles an acceptFrom entry may name this sender by.

    Verified: its descriptor name and agent_id (both proven by the transport). External: its @scheme:topic
    tag (so a worker can allow one trigger, such as a CI job, by its tag). Unverified: none; its claimed
    name proves nothing.
    """
    if sender.sender_class is SenderClass.VERIFIED:
        if not sender.agent_id:
            return frozenset()
        return frozenset(h for h in (sender.name, sender.agent_id) if h)
    if sender.sender_class is SenderClass.EXTERNAL:
        return frozenset({sender.name}) if sender.name else frozenset()
    return frozenset()


def check_acl(sender: Sender, bucket: Bucket, view: ReceiverView) -> str | None:
    """None when accepted, else "acl:<bucket>". Unknown passes only when "unknown" itself is listed."""
    accept_from = view.effective_accept_from()
    if bucket.value in accept_from:
        return None
    # Explicit handle entries override bucket rules (a handle may admit one sender its bucket would refuse).
    # An entry spelled like a bucket is always the bucket, so an agent that names itself "parent" cannot ride
    # on a bucket entry.
    handles = accept_from - BUCKET_NAMES
    if handles & sender_handles(sender):
        return None
    return f"acl:{bucket.value}"
