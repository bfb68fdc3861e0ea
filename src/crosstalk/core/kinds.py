"""Message kinds and delivery modes, with the aliases other designs use for them."""

from __future__ import annotations

from crosstalk.core.errors import MessageError
from crosstalk.core.strenum import StrEnum


class Kind(StrEnum):
    INFORM = "inform"  # a message for the model; no answer owed
    ASK = "ask"  # an inform that opens a reply obligation; verified senders only
    COMMAND = "command"  # work for a worker, only from its parent
    META = "meta"  # context that never starts a turn
    PING = "ping"  # liveness only; never injected


class Delivery(StrEnum):
    AUTO = "auto"  # reach the model soonest without breaking a tool call
    STEER = "steer"  # into the running turn now, where the harness can
    NEXT_TURN = "next_turn"  # after the current turn; never wakes an idle session where avoidable


# Every other spelling of a kind or a delivery crosstalk accepts lives here, nowhere else.
KIND_ALIASES: dict[str, Kind] = {"user": Kind.INFORM}  # pi-crosstalk calls an ordinary user turn "user"
DELIVERY_ALIASES: dict[str, Delivery] = {
    "immediate": Delivery.AUTO,  # the socket protocol's first spelling of auto
    "followUp": Delivery.NEXT_TURN,  # pi's deliverAs
    "follow_up": Delivery.NEXT_TURN,
}
# pi's own spelling of each delivery (its deliverAs option, and `crosstalk send --mode` that mirrors it); the pi
# extension's `/crosstalk send` also takes its follow-up mode in lower case.
PI_MODES: dict[Delivery, str] = {Delivery.AUTO: "auto", Delivery.STEER: "steer", Delivery.NEXT_TURN: "followUp"}
PI_MODE_ALIASES: dict[str, Delivery] = {**{mode: d for d, mode in PI_MODES.items()}, "followup": Delivery.NEXT_TURN}


def parse_kind(value: object) -> Kind:
    if isinstance(value, Kind):
        return value
    if not isinstance(value, str):
        raise MessageError("kind", f"must be a string, got {type(value).__name__}")
    if value in KIND_ALIASES:
        return KIND_ALIASES[value]
    try:
        return Kind(value)
    except ValueError:
        allowed = ", ".join(k.value for k in Kind)
        raise MessageError("kind", f"unknown kind {value!r} (expected one of: {allowed})") from None


def parse_delivery(value: object) -> Delivery:
    if isinstance(value, Delivery):
        return value
    if not isinstance(value, str):
        raise MessageError("delivery", f"must be a string, got {type(value).__name__}")
    if value in DELIVERY_ALIASES:
        return DELIVERY_ALIASES[value]
    try:
        return Delivery(value)
    except ValueError:
        allowed = ", ".join([*(d.value for d in Delivery), *DELIVERY_ALIASES])
        raise MessageError("delivery", f"unknown delivery {value!r} (expected one of: {allowed})") from None
