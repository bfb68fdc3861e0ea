"""Mock of the OpenAI Responses API (POST /v1/responses, SSE) for Codex.

Events: response.created, response.output_item.added, response.output_text.delta, response.output_item.done,
response.completed. Codex puts its own user-role items (environment context, AGENTS.md) before the prompt, so the
newest user message is the prompt.

A line `CALL <namespace>.<tool> <json>` (or `CALL <tool> <json>`) in the newest input item's text makes the answer a
function_call (Codex lists MCP tools under the namespace `mcp__<server>`); a function_call_output as the newest
item is answered with text. A line `SLEEP <seconds>` delays the answer (a slow turn). `$MESSAGE_ID` in a CALL stands
for the message-id of the newest envelope in that text. Every call the mock made is in `tool_calls`."""

from __future__ import annotations

import re
import threading
import time
import uuid
from typing import Any, ClassVar

from .base import Handler, RecordedRequest, ScriptedModelServer, obey_script, text_parts

ENVELOPE_ID_RE = re.compile(r'<cross-session-message [^>]*message-id="([^"]+)"')


class ScriptedResponses(ScriptedModelServer):
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

    def __init__(self, reply: str | None = None) -> None:
        super().__init__(reply)
        self.tool_calls: list[dict[str, Any]] = []
        self._calls_lock = threading.Lock()

    def scripted_call(self, body: dict[str, Any]) -> tuple[str | None, str, str] | None:
        items = body.get("input") if isinstance(body.get("input"), list) else []
        last = items[-1] if items else {}
        if not isinstance(last, dict) or last.get("type", "message") != "message":
            return None  # a tool's output: answer with text
        call = obey_script(self.with_scripts(text_parts(last.get("content"))), {"$MESSAGE_ID": ENVELOPE_ID_RE})
        if call is None:
            return None
        target, args = call
        namespace, _, tool = target.rpartition(".")
        return (namespace or None), tool, args

    def handle_post(self, h: Handler, req: RecordedRequest) -> None:
        if not self.is_generation_path(req.path):
            return h.send_json(404, {"error": {"message": f"mock: no route {req.path}"}})
        call = self.scripted_call(req.body)
        if call is not None:
            return self._send_call(h, *call)
        text = self.answer(req.body)
        rid, mid = "resp_" + uuid.uuid4().hex[:12], "msg_" + uuid.uuid4().hex[:12]
        response: dict[str, Any] = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        item = {
            "type": "message",
            "id": mid,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": response},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": 0,
                "item_id": mid,
                "delta": text,
            },
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {
                "type": "response.completed",
                "response": {**response, "status": "completed", "output": [item], "usage": usage},
            },
        ]
        h.start_sse()
        for event in events:
            h.send_event(event, event["type"])
        return None

    def _send_call(self, h: Handler, namespace: str | None, tool: str, args: str) -> None:
        item: dict[str, Any] = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:8],
                                "call_id": "call_" + uuid.uuid4().hex[:8], "name": tool, "arguments": args,
                                "status": "completed"}  # fmt: skip
        if namespace:
            item["namespace"] = namespace
        with self._calls_lock:
            self.tool_calls.append({"name": tool, "namespace": namespace, "arguments": args, "at": time.time()})
        rid = "resp_" + uuid.uuid4().hex[:12]
        response: dict[str, Any] = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}  # fmt: skip
        h.start_sse()
        for event in (
            {"type": "response.created", "response": response},
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": ""}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed",
             "response": {**response, "status": "completed", "output": [item], "usage": usage}},
        ):  # fmt: skip
            h.send_event(event, str(event["type"]))
        return None
