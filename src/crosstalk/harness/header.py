"""How a crosstalk message reads in a harness that takes plain text for it (Qwen Code, OpenCode): one header line,
rebuilt from the verified sender, then the body. Qwen wraps every inbox message in its own
`<cross_session_message from=… name=…>` and defangs any tag inside that looks like an envelope (crosstalk's
`<cross-session-message>` would reach the model as `&lt;cross-session-message`); OpenCode has no envelope of its own
for it, and shows the text as a user message.

    [crosstalk inform · from agents:alpha · message-id 01a2…]
    [crosstalk ask · from agents:alpha · message-id 01a2… · answer with the crosstalk reply tool and this id]
    [crosstalk reply · from agents:beta · message-id 01a3… · in-reply-to 01a2…]
    [crosstalk inform · from @ci:build (external) · message-id 01a4…]
"""

from __future__ import annotations

from crosstalk.core.kinds import Kind
from crosstalk.core.sender import SenderClass
from crosstalk.harness.base import InjectRequest

NAMED_BUCKETS = ("parent", "children", "peers", "agents")


def who(request: InjectRequest) -> str:
    sender = request.sender
    name = sender.label
    if request.bucket in NAMED_BUCKETS:
        name = f"{request.bucket}:{sender.name or sender.agent_id or name}"
    if sender.sender_class is not SenderClass.VERIFIED:
        name += f" ({sender.sender_class.value})"
    return name


def render(request: InjectRequest) -> str:
    msg = request.message
    parts = [f"crosstalk {msg.kind.value}", f"from {who(request)}", f"message-id {msg.message_id}"]
    if msg.in_reply_to:
        parts.append(f"in-reply-to {msg.in_reply_to}")
    if msg.kind is Kind.ASK:
        parts.append("answer with the crosstalk reply tool and this id")
    return f"[{' · '.join(parts)}]\n{msg.text}"
