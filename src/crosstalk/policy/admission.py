"""Admission limits (per sender and in total): answer whether one more message fits. It never evicts accepted work."""

from __future__ import annotations

from dataclasses import dataclass, fields

from crosstalk.core.kinds import Kind
from crosstalk.policy.errors import PolicyError


def _check_non_negative(obj: Limits | Load) -> None:
    # A negative or fractional limit or count is a caller bug; refuse it loudly rather than admit oddly.
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PolicyError(f"{f.name}: must be a whole number ≥ 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class Limits:
    max_text_bytes: int = 64 * 1024  # UTF-8 bytes of the text parts
    max_pending_tasks: int = 256  # unresolved task ids per agent (continuations create none)
    max_open_asks: int = 32  # reply obligations per agent
    max_default_waits: int = 64  # concurrent default-wait SendMessage calls

    def __post_init__(self) -> None:
        _check_non_negative(self)


@dataclass(frozen=True, slots=True)
class Load:
    """The receiver's load before the message in hand arrives."""

    pending_tasks: int = 0
    open_asks: int = 0
    default_waits: int = 0

    def __post_init__(self) -> None:
        _check_non_negative(self)


def check_admission(
    kind: Kind,
    text_bytes: int,
    load: Load,
    limits: Limits,
    *,
    new_task: bool,
    default_wait: bool,
) -> str | None:
    """None when admitted, else an "admission:..." reason. A limit of N admits the Nth, refuses the N+1th."""
    if text_bytes > limits.max_text_bytes:
        return "admission:text_too_large"
    if new_task and load.pending_tasks >= limits.max_pending_tasks:
        return "admission:pending_tasks"
    if kind is Kind.ASK and load.open_asks >= limits.max_open_asks:
        return "admission:open_asks"
    if default_wait and load.default_waits >= limits.max_default_waits:
        return "admission:default_waits"
    return None
