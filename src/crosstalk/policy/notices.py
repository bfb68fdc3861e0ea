"""crosstalk's own notices to its agent's session (a claim changed, a native reply bounced).

A notice is not a message from a sender: it is crosstalk telling its own session about work already accepted, so
the role's ACL and the load limits do not apply, and only an inform is a notice. It is recognised by the notice
transport with the receiving agent itself as the verified sender, which no ingress can produce (the receiver builds
such an Inbound in-process only).
"""

from __future__ import annotations

from crosstalk.core.kinds import Kind
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy.view import ReceiverView

NOTICE_TRANSPORT = "crosstalk"


def is_own_notice(sender: Sender, view: ReceiverView, transport: str) -> bool:
    verified = sender.sender_class is SenderClass.VERIFIED
    return transport == NOTICE_TRANSPORT and verified and sender.agent_id == view.agent_id


def check_notice(kind: Kind) -> str | None:
    return None if kind is Kind.INFORM else "kind:notice_inform_only"
