"""Mock of the Anthropic Messages API (POST /v1/messages, SSE or JSON) for Claude Code.

Claude Code sends `POST /v1/messages?beta=true`; the newest message may have role `system`, and user turns carry
`<system-reminder>` text blocks that are not the user's words (skipped when finding the newest user text).

Tool calls are scripted by the text the model reads: a line `CALL <tool> <json>` in the newest user-role message
(text, or a tool result) makes the answer a tool_use of that tool with that input; a line `SLEEP <seconds>` before
the answer delays it (a slow model turn). In a CALL's JSON, `$MESSAGE_ID` stands for the message-id of the newest
`<cross-session-message>` envelope in that text and `$FROM` for its `from` address (how a scripted model answers the
message it was sent, with the reply tool or natively). Anything
else is answered with text (the digest, or `reply`). Every tool_use the mock sent is in `tool_calls`."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from typing import Any, ClassVar

from .base import Handler, RecordedRequest, ScriptedModelServer, route, scripted_call_args, text_parts

ENVELOPE_ID_RE = re.compile(r'<cross-session-message [^>]*message-id="([^"]+)"')
ENVELOPE_FROM_RE = re.compile(r'<cross-session-message [^>]*from="([^"]+)"')


def last_user_blocks_text(body: dict[str, Any]) -> str:
    """All the text of the newest user-role message: its text blocks and its tool results' text."""
    for msg in reversed(body.get("messages") or []):
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        out = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                out.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(inner if isinstance(inner, str) else text_parts(inner))
        return "\n".join(out)
    return ""


class ScriptedAnthropic(ScriptedModelServer):
    name: ClassVar[str] = "anthropic"
    model: ClassVar[str] = "claude-mock"
    generation_path: ClassVar[str] = "/v1/messages"

    def newest_user_text(self, body: dict[str, Any]) -> str:
        for msg in reversed(body.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") == "user":
                text = text_parts(msg.get("content"), skip_prefixes=("<system-reminder>",))
                if text:
                    return text
        return ""

    def __init__(self, reply: str | None = None) -> None:
        super().__init__(reply)
        self.tool_calls: list[dict[str, Any]] = []
        self._calls_lock = threading.Lock()

    def scripted_call(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """The tool call the newest user-role message asks for (`CALL <tool> <json>`), or None."""
        return scripted_call_args(
            self.with_scripts(last_user_blocks_text(body)), {"$MESSAGE_ID": ENVELOPE_ID_RE, "$FROM": ENVELOPE_FROM_RE}
        )

    def handle_post(self, h: Handler, req: RecordedRequest) -> None:
        if route(req.path).endswith("/count_tokens"):
            return h.send_json(200, {"input_tokens": 10})
        if not self.is_generation_path(req.path):
            return h.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "mock"}})
        call = self.scripted_call(req.body)
        if call is None:
            text = self.answer(req.body)
            block: dict[str, Any] = {"type": "text", "text": text}
            opening, delta = block | {"text": ""}, {"type": "text_delta", "text": text}
            return self._send_message(h, req, block, opening, delta, "end_turn")
        name, args = call
        block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": name, "input": args}
        with self._calls_lock:
            self.tool_calls.append({"name": name, "input": args, "at": time.time()})
        opening, delta = block | {"input": {}}, {"type": "input_json_delta", "partial_json": json.dumps(args)}
        return self._send_message(h, req, block, opening, delta, "tool_use")

    def _send_message(
        self,
        h: Handler,
        req: RecordedRequest,
        block: dict[str, Any],
        opening: dict[str, Any],
        delta: dict[str, Any],
        stop_reason: str,
    ) -> None:
        """One assistant message holding `block`: whole, or (a streaming request) as the Messages API streams it,
        the block opened as `opening` and filled by one `delta`."""
        message: dict[str, Any] = {
            "id": "msg_" + uuid.uuid4().hex[:20],
            "type": "message",
            "role": "assistant",
            "model": req.body.get("model", self.model),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 0, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0},
        }  # fmt: skip
        if not req.body.get("stream"):
            return h.send_json(200, {**message, "content": [block], "stop_reason": stop_reason})
        h.start_sse()
        h.send_event({"type": "message_start", "message": message}, "message_start")
        h.send_event({"type": "content_block_start", "index": 0, "content_block": opening}, "content_block_start")
        h.send_event({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        h.send_event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        h.send_event(
            {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": 5}},
            "message_delta",
        )  # fmt: skip
        h.send_event({"type": "message_stop"}, "message_stop")
        return None
