"""How a message reads inside a pi session (the tags pi-crosstalk users know): the sender as the receiver
classed it, the sender's delivery when it chose one, then the body.

    [from parent:orch · steer] body          an agent of a bucket (parent, children, peers, agents) and its name
    [from @ci:build] body                    an external sender names itself by its @scheme:topic tag
    [crosstalk meta from parent:orch] body   context that never starts a turn
    [ask from agents:alpha · id 01a2…] body  an ask: answered with the `reply` tool and that id
    [reply from agents:beta · to 01a2…] body the answer to an ask this session sent
"""

from __future__ import annotations

from crosstalk.core.kinds import PI_MODES, Delivery, Kind
from crosstalk.harness.base import InjectRequest

MODE_SUFFIX: dict[Delivery, str] = {d: f" · {mode}" for d, mode in PI_MODES.items() if d is not Delivery.AUTO}
NAMED_BUCKETS = ("parent", "children", "peers", "agents")


def who(request: InjectRequest) -> str:
    sender = request.sender
    name = sender.name or sender.agent_id or "unknown"
    if request.bucket in NAMED_BUCKETS:
        return f"{request.bucket}:{name}"
    return name  # external: its @scheme:topic tag; unknown: the name it gave


def render(request: InjectRequest) -> str:
    msg = request.message
    if msg.kind is Kind.META:
        return f"[crosstalk meta from {who(request)}] {msg.text}"
    if msg.kind is Kind.ASK:
        return f"[ask from {who(request)} · id {msg.message_id}] {msg.text}"
    if msg.in_reply_to:
        return f"[reply from {who(request)} · to {msg.in_reply_to}] {msg.text}"
    return f"[from {who(request)}{MODE_SUFFIX.get(request.delivery, '')}] {msg.text}"
