"""Mock of the Anthropic Messages API (POST /v1/messages, SSE or JSON) for Claude Code.

Claude Code sends `POST /v1/messages?beta=true`; the newest message may have role `system`, and user turns carry
`<system-reminder>` text blocks that are not the user's words (skipped when finding the newest user text)."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from .base import Handler, MockModelServer, RecordedRequest, route, text_parts


class MockAnthropic(MockModelServer):
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

    def handle_post(self, h: Handler, req: RecordedRequest) -> None:
        if route(req.path).endswith("/count_tokens"):
            return h.send_json(200, {"input_tokens": 10})
        if not self.is_generation_path(req.path):
            return h.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "mock"}})
        text = self.answer(req.body)
        model = req.body.get("model", self.model)
        message: dict[str, Any] = {
            "id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 0, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0},
        }
        if not req.body.get("stream"):
            done = {**message, "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
            return h.send_json(200, done)
        h.start_sse()
        h.send_event({"type": "message_start", "message": message}, "message_start")
        h.send_event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                     "content_block_start")
        h.send_event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                     "content_block_delta")
        h.send_event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        h.send_event({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                      "usage": {"output_tokens": 5}}, "message_delta")
        h.send_event({"type": "message_stop"}, "message_stop")
        return None
