"""The Chat Completions mock as Qwen Code talks to it (`ScriptedQwenChat`).

Qwen Code 0.24.4 differs from pi on the wire in two ways the script must not trip over (docs/dev/qwen-adapter.md):
- a user message may carry content parts that are only a `<system-reminder>` block (Qwen's own context): they are
  not what the user or a peer said, so the script reads past them;
- a crosstalk message is a header line inside Qwen's own envelope (`$MESSAGE_ID` is read from it);
- the TUI makes side requests of its own (memory extraction, follow-up suggestions) that offer no tools: a script
  line in their text is never answered with a tool call, or the side request would fail and the TUI say so.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from .base import RecordedRequest, scripted_call_args, text_parts
from .chat import ScriptedChat

REMINDER = "<system-reminder>"
HEADER_ID_RE = re.compile(r"\[crosstalk [^\]]*· message-id ([0-9a-f-]{36})")


def _text(content: Any) -> str:
    """A message's text without the parts that are only a system reminder."""
    if isinstance(content, list):
        content = [
            part for part in content
            if not (isinstance(part, dict) and isinstance(part.get("text"), str)
                    and part["text"].lstrip().startswith(REMINDER) and part["text"].rstrip().endswith(">"))
        ]  # fmt: skip
    return text_parts(content)


class ScriptedQwenChat(ScriptedChat):
    name: ClassVar[str] = "qwen-chat"

    def newest_user_text(self, body: dict[str, Any]) -> str:
        for msg in reversed(body.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") == "user":
                return _text(msg.get("content"))
        return ""

    def newest_input_text(self, body: dict[str, Any]) -> str:
        if not body.get("tools"):
            return ""  # a side request: answered with text (the digest), never a tool call or a sleep
        for msg in reversed(body.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") in ("user", "tool"):
                return _text(msg.get("content"))
            if isinstance(msg, dict) and msg.get("role") == "assistant":
                return ""
        return ""

    def scripted_call(self, text: str) -> tuple[str, dict[str, Any]] | None:
        """`$MESSAGE_ID`: the message-id of the newest crosstalk header in the text (harness/header.py)."""
        return scripted_call_args(self.with_scripts(text), {"$MESSAGE_ID": HEADER_ID_RE})

    def conversation_requests(self) -> list[RecordedRequest]:
        """The model requests of the session's own turns (those that offer tools), without the side requests."""
        return [r for r in self.model_requests() if r.body.get("tools")]
