"""The kind table: which kinds may reach the model from which sender.

By the sender's class and bucket, the receiver's role and the transport the message came on.
"""

from __future__ import annotations

from crosstalk.core.kinds import Kind
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy.roles import Bucket, Role
from crosstalk.policy.view import ReceiverView

# The uds frame has no kind encoding beyond inform, so nothing that opens an obligation or
# carries work may arrive on it, whoever the sender is.
UDS_TRANSPORT = "uds"
UDS_KINDS: frozenset[Kind] = frozenset({Kind.INFORM, Kind.META, Kind.PING})


def check_kind(kind: Kind, bucket: Bucket, sender: Sender, view: ReceiverView, transport: str) -> str | None:
    """None when this kind may pass, else a "kind:..." reason. Run after the ACL: it never widens it.

    A refused message is rejected, never downgraded to inform: the text would carry the same request.
    """
    if transport == UDS_TRANSPORT and kind not in UDS_KINDS:
        return "kind:not_on_uds"
    if kind is Kind.COMMAND:
        # Only the owner commands, and only its worker (claim sets both). Checking the sender class too
        # keeps a mislabelled bucket from granting command to an unproven sender.
        verified = sender.sender_class is SenderClass.VERIFIED
        if bucket is Bucket.PARENT and view.role is Role.WORKER and verified:
            return None
        return "kind:command_needs_parent"
    if kind is Kind.ASK:
        # An ask opens a reply obligation, so the asker must be someone a reply can be routed back to.
        if sender.sender_class is SenderClass.VERIFIED:
            return None
        return "kind:ask_needs_verified"
    if kind in (Kind.INFORM, Kind.META, Kind.PING):
        return None
    return "kind:unknown"  # a kind added to core without a row here is refused until it gets one
