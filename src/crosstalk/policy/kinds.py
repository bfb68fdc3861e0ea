"""The kind table: which kinds may reach the model from which sender, on which transport (policy/transport.py)."""

from __future__ import annotations

from crosstalk.core.kinds import Kind
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy.roles import Bucket, Role
from crosstalk.policy.transport import RELAY_TRANSPORT, UDS_KINDS, check_transport
from crosstalk.policy.view import ReceiverView


def check_kind(kind: Kind, bucket: Bucket, sender: Sender, view: ReceiverView, transport: str) -> str | None:
    """None when this kind may pass, else a "kind:..." reason. Run after the ACL: it never widens it.

    A refused message is rejected, never downgraded to inform: the text would carry the same request.
    """
    refused = check_transport(kind, transport)
    if refused is not None:
        return refused
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
        if transport == RELAY_TRANSPORT and sender.sender_class is SenderClass.EXTERNAL:
            return None  # another machine's agent, vouched for by its relay process: the reply goes back across it
        return "kind:ask_needs_verified"
    if kind in UDS_KINDS:  # no obligation, no work: whoever the ACL admits
        return None
    return "kind:unknown"  # a kind added to core without a row here is refused until it gets one
