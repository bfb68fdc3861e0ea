"""Showing text that came from someone else (a harness's session record, a thread's name, a journal's sender) to a
person or a model: the one rule. Control characters are escaped, never passed through (an ESC sequence would drive
the terminal, a newline would forge a row), and the length is capped with an ellipsis."""

from __future__ import annotations

NAME_CHARS = 64  # a name as listed: enough to tell sessions apart
TEXT_CHARS = 256  # any other field shown in a row (a cwd, a reason)
ELLIPSIS = "…"

# C0, DEL, C1, and the Unicode line and paragraph separators and bidi overrides that reorder or break a line.
_ESCAPED = {*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
_TABLE = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _ESCAPED}


def for_display(value: object, limit: int = NAME_CHARS) -> str:
    """`value` as one safe line: control characters escaped (`\\x1b`), at most `limit` characters (the last one an
    ellipsis when cut). Only the first limit characters are ever examined, so a megabyte name costs nothing."""
    text = value if isinstance(value, str) else str(value)
    head = text[: limit + 1].translate(_TABLE)
    if len(head) <= limit and len(text) <= limit:
        return head
    return head[: max(0, limit - 1)] + ELLIPSIS
