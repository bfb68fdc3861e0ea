"""What crosstalk itself tells an agent's session: pure text, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

MAX_LISTED = 10
FIRST_LINE_CHARS = 200


def bounce_text(native_text: str, open_messages: Sequence[dict[str, str]]) -> str:
    """The notice for a native reply that was not delivered: its first line quoted, and the open inbound messages
    (newest first, at most 10) the session may answer with the reply tool."""
    first_line = (native_text.strip().splitlines() or [""])[0][:FIRST_LINE_CHARS]
    lines = [
        f"crosstalk: your native message was not delivered to anyone (native replies are not forwarded): "
        f"{first_line!r}.",
    ]
    listed = list(open_messages)[:MAX_LISTED]
    if listed:
        lines.append("To answer one of these, call the reply tool with its message_id; otherwise use send_message:")
        lines += [f"- {m['message_id']} from {m['from']} ({m['kind']})" for m in listed]
        lines.append("receive_message lists the rest.")
    else:
        lines.append("No inbound message is open for a reply: use send_message to write to an agent.")
    return "\n".join(lines)
