"""Mock of the OpenAI Responses API (POST /v1/responses, SSE) for Codex.

Events: response.created, response.output_item.added, response.output_text.delta, response.output_item.done,
response.completed. Codex puts its own user-role items (environment context, AGENTS.md) before the prompt, so the
newest user message is the prompt."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from .base import Handler, MockModelServer, RecordedRequest, text_parts


class MockResponses(MockModelServer):
    name: ClassVar[str] = "responses"
    generation_path: ClassVar[str] = "/responses"

    def newest_user_text(self, body: dict[str, Any]) -> str:
        items = body.get("input")
        if isinstance(items, str):
            return items
        for item in reversed(items or []):
            if isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") == "user":
                return text_parts(item.get("content"))
        return ""

    def handle_post(self, h: Handler, req: RecordedRequest) -> None:
        if not self.is_generation_path(req.path):
            return h.send_json(404, {"error": {"message": f"mock: no route {req.path}"}})
        text = self.answer(req.body)
        rid, mid = "resp_" + uuid.uuid4().hex[:12], "msg_" + uuid.uuid4().hex[:12]
        response: dict[str, Any] = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": response},
            {"type": "response.output_item.added", "output_index": 0,
             "item": {**item, "status": "in_progress", "content": []}},
            {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "item_id": mid,
             "delta": text},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed",
             "response": {**response, "status": "completed", "output": [item], "usage": usage}},
        ]
        h.start_sse()
        for event in events:
            h.send_event(event, event["type"])
        return None
