"""The one message record and its strict validation.

This is the internal record every ingress decodes into and the journal stores; it is not a wire format.
"""

from __future__ import annotations

import time

from crosstalk.core.errors import MessageError, MessageTooLarge
from crosstalk.core.ids import is_hop_entry, new_message_id
from crosstalk.core.kinds import Delivery, Kind, parse_delivery, parse_kind
from crosstalk.core.record import Record

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

MAX_TEXT_BYTES = 64 * 1024  # admission limit on the text parts, UTF-8 encoded
MAX_NAME_CHARS = 256
MAX_ID_CHARS = 128
_KNOWN_PART_TYPES = ("text",)


def utc_now_iso() -> str:
    """Current time as RFC 3339 UTC with milliseconds, e.g. 2026-11-29T21:04:05.123Z."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def parse_timestamp(value: str) -> datetime:
    """Parse an RFC 3339 timestamp (a trailing Z allowed); naive times are taken as UTC."""
    from datetime import UTC, datetime  # imported here: the CLI's send path never parses a timestamp

    dt = datetime.fromisoformat(value)
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


class TextPart(Record):
    _fields = ("text",)
    __slots__ = _fields
    text: str

    def __init__(self, text: str) -> None:
        self._set(text)

    def to_dict(self) -> dict[str, str]:
        return {"type": "text", "text": self.text}


class Message(Record):
    """A message as the receiver chain and the journal hold it. A Record (core/record.py), not a dataclass:
    `crosstalk send` builds one on its start-up path."""

    _fields = (
        "message_id", "to", "parts", "from_", "kind", "delivery", "in_reply_to", "context_id", "task_id",
        "deadline_seconds", "hop_chain", "sent_at",
    )  # fmt: skip
    __slots__ = _fields
    message_id: str
    to: str
    parts: tuple[TextPart, ...]
    from_: str | None  # display only: the receiver derives the sender from the transport
    kind: Kind
    delivery: Delivery
    in_reply_to: str | None
    context_id: str | None
    task_id: str | None
    deadline_seconds: int  # ask only; 0 = none
    hop_chain: tuple[str, ...]
    sent_at: str

    def __init__(
        self,
        message_id: str,
        to: str,
        parts: tuple[TextPart, ...],
        from_: str | None = None,
        kind: Kind = Kind.INFORM,
        delivery: Delivery = Delivery.AUTO,
        in_reply_to: str | None = None,
        context_id: str | None = None,
        task_id: str | None = None,
        deadline_seconds: int = 0,
        hop_chain: tuple[str, ...] = (),
        sent_at: str | None = None,
    ) -> None:
        self._set(
            message_id, to, parts, from_, kind, delivery, in_reply_to, context_id, task_id, deadline_seconds,
            hop_chain, utc_now_iso() if sent_at is None else sent_at,
        )  # fmt: skip

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts)

    def text_bytes(self) -> int:
        return sum(len(p.text.encode("utf-8")) for p in self.parts)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "message_id": self.message_id,
            "from": self.from_,
            "to": self.to,
            "kind": self.kind.value,
            "delivery": self.delivery.value,
            "in_reply_to": self.in_reply_to,
            "context_id": self.context_id,
            "task_id": self.task_id,
            "deadline_seconds": self.deadline_seconds,
            "hop_chain": list(self.hop_chain),
            "sent_at": self.sent_at,
            "parts": [p.to_dict() for p in self.parts],
        }
        return out

    @classmethod
    def from_dict(cls, data: object, *, check_size: bool = True) -> Message:
        """Validate and build a record. Unknown top-level fields are ignored (a newer peer may add some)."""
        if not isinstance(data, dict):
            raise MessageError("message", f"must be a JSON object, got {type(data).__name__}")
        message_id = _required_str(data, "message_id", MAX_ID_CHARS)
        to = _required_str(data, "to", MAX_NAME_CHARS)
        parts = _parse_parts(data.get("parts"))
        kind = parse_kind(data["kind"]) if data.get("kind") is not None else Kind.INFORM
        delivery = parse_delivery(data["delivery"]) if data.get("delivery") is not None else Delivery.AUTO
        deadline = data.get("deadline_seconds", 0)
        if deadline is None:
            deadline = 0
        if isinstance(deadline, bool) or not isinstance(deadline, int) or deadline < 0:
            raise MessageError("deadline_seconds", f"must be a whole number of seconds ≥ 0, got {deadline!r}")
        if deadline and kind is not Kind.ASK:
            raise MessageError("deadline_seconds", f"only an ask has a deadline (kind is {kind.value})")
        hop_chain = data.get("hop_chain") or []
        if not isinstance(hop_chain, list) or not all(is_hop_entry(h) for h in hop_chain):
            raise MessageError("hop_chain", "must be a list of 24-hex entries")
        sent_at = data.get("sent_at")
        if sent_at in (None, ""):
            sent_at = utc_now_iso()  # ours, well-formed by construction
        elif not isinstance(sent_at, str):
            raise MessageError("sent_at", "must be an RFC 3339 timestamp string")
        else:
            try:
                parse_timestamp(sent_at)
            except ValueError:
                raise MessageError("sent_at", f"not an RFC 3339 timestamp: {sent_at!r}") from None
        msg = cls(
            message_id=message_id,
            to=to,
            parts=parts,
            from_=_optional_str(data, "from", MAX_NAME_CHARS),
            kind=kind,
            delivery=delivery,
            in_reply_to=_optional_str(data, "in_reply_to", MAX_ID_CHARS),
            context_id=_optional_str(data, "context_id", MAX_ID_CHARS),
            task_id=_optional_str(data, "task_id", MAX_ID_CHARS),
            deadline_seconds=deadline,
            hop_chain=tuple(hop_chain),
            sent_at=sent_at,
        )
        if check_size:
            check_text_size(msg)
        return msg


def new_message(
    to: str,
    text: str,
    *,
    from_: str | None = None,
    kind: Kind | str = Kind.INFORM,
    delivery: Delivery | str = Delivery.AUTO,
    in_reply_to: str | None = None,
    context_id: str | None = None,
    deadline_seconds: int = 0,
    message_id: str | None = None,
) -> Message:
    """Build and validate a fresh outbound message with a new uuidv7 id."""
    return Message.from_dict(
        {
            "message_id": message_id or new_message_id(),
            "to": to,
            "from": from_,
            "kind": kind.value if isinstance(kind, Kind) else kind,
            "delivery": delivery.value if isinstance(delivery, Delivery) else delivery,
            "in_reply_to": in_reply_to,
            "context_id": context_id,
            "deadline_seconds": deadline_seconds,
            "parts": [{"type": "text", "text": text}],
        }
    )


def check_text_size(msg: Message, limit: int = MAX_TEXT_BYTES) -> None:
    size = msg.text_bytes()
    if size > limit:
        raise MessageTooLarge("parts", f"text is {size} bytes, over the {limit}-byte limit")


def _required_str(data: dict[str, Any], key: str, max_chars: int) -> str:
    if key not in data or data[key] is None:
        raise MessageError(key, "is required")
    value = data[key]
    if not isinstance(value, str):
        raise MessageError(key, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise MessageError(key, "must not be empty")
    if len(value) > max_chars:
        raise MessageError(key, f"is {len(value)} characters, over the {max_chars} limit")
    return value


def _optional_str(data: dict[str, Any], key: str, max_chars: int) -> str | None:
    if data.get(key) in (None, ""):
        return None
    return _required_str(data, key, max_chars)


def _parse_parts(parts: object) -> tuple[TextPart, ...]:
    if parts is None:
        raise MessageError("parts", "is required")
    if not isinstance(parts, list) or not parts:
        raise MessageError("parts", "must be a non-empty list")
    out: list[TextPart] = []
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            raise MessageError(f"parts[{i}]", "must be an object")
        ptype = part.get("type", "text")
        if ptype not in _KNOWN_PART_TYPES:
            raise MessageError(f"parts[{i}].type", f"unsupported part type {ptype!r} (only 'text')")
        text = part.get("text")
        if not isinstance(text, str):
            raise MessageError(f"parts[{i}].text", "must be a string")
        out.append(TextPart(text))
    return tuple(out)
