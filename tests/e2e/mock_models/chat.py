"""Mock of the OpenAI Chat Completions API (POST /v1/chat/completions, SSE or JSON) for pi."""

from __future__ import annotations

import time
import uuid
from typing import Any, ClassVar

from .base import Handler, MockModelServer, RecordedRequest, text_parts


class MockChat(MockModelServer):
    name: ClassVar[str] = "chat"
    generation_path: ClassVar[str] = "/chat/completions"

    def newest_user_text(self, body: dict[str, Any]) -> str:
        for msg in reversed(body.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") == "user":
                return text_parts(msg.get("content"))
        return ""

    def handle_post(self, h: Handler, req: RecordedRequest) -> None:
        if not self.is_generation_path(req.path):
            return h.send_json(404, {"error": {"message": f"mock: no route {req.path}"}})
        text = self.answer(req.body)
        base = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:12],
            "created": int(time.time()),
            "model": req.body.get("model", self.model),
        }
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not req.body.get("stream"):
            return h.send_json(
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                },
            )
        chunk = {**base, "object": "chat.completion.chunk"}
        h.start_sse()
        h.send_event(
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
        )
        h.send_event({**chunk, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
        h.send_event({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        h.send_event({**chunk, "choices": [], "usage": usage})
        h.send_event("[DONE]")
        return None
