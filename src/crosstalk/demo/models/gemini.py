"""A scripted mock of the Gemini API (v1beta, as Gemini CLI 0.61.0 calls it with `GOOGLE_GEMINI_BASE_URL`), scripted
like the other mock model servers (crosstalk.demo.models): a model request is answered from the newest input the
model reads (everything after its last `model` turn: the prompt, tool results, hook context), where a
`CALL <tool> <json>` line makes that function call (`$MESSAGE_ID` stands for the newest crosstalk envelope's
message-id), a `SLEEP <seconds>` line delays the answer, and anything else is echoed as a digest.

    POST …/models/<m>:streamGenerateContent?alt=sse   SSE, one `data:` GenerateContentResponse
    POST …/models/<m>:generateContent                 the same response as JSON
    POST …/models/<m>:countTokens                     {"totalTokens": 10}
    GET  …/models                                     a one-model list

A request that asks for JSON (`generationConfig.responseMimeType: application/json`: the CLI's side calls such as
its next-speaker check) gets an object filled from its schema, never a tool call. Every request is recorded
(`requests`), so a test asserts on what the model saw.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, ClassVar

from .base import Handler, RecordedRequest, ScriptedModelServer, route, scripted_call_args
from .wiring import GEMINI_MODEL as MODEL

ENVELOPE_ID_RE = re.compile(r'message-id="([^"]+)"')
GENERATION = (":streamGenerateContent", ":generateContent")


def fill(schema: Any, depth: int = 0) -> Any:
    """A minimal value of a JSON schema (Gemini's Schema names types in upper case)."""
    if not isinstance(schema, dict) or depth > 6:
        return None
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        values = schema["enum"]
        return "user" if "user" in values else values[0]
    if kind == "object":
        return {k: fill(v, depth + 1) for k, v in (schema.get("properties") or {}).items()}
    return {"array": [], "number": 0, "integer": 0, "boolean": False}.get(kind, "mock")


def part_texts(parts: Any) -> list[str]:
    """The text of each part: its `text`, or a function response's JSON."""
    out: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            out.append(part["text"])
        elif isinstance(part.get("functionResponse"), dict):
            out.append(json.dumps(part["functionResponse"].get("response")))
    return out


class ScriptedGemini(ScriptedModelServer):
    name: ClassVar[str] = "gemini"
    model: ClassVar[str] = MODEL

    def __init__(self, reply: str | None = None) -> None:
        super().__init__(reply)
        self.function_calls: list[dict[str, Any]] = []

    def is_generation_path(self, path: str) -> bool:
        return route(path).endswith(GENERATION)

    def newest_user_text(self, body: dict[str, Any]) -> str:
        for content in reversed(body.get("contents") or []):
            if isinstance(content, dict) and content.get("role") == "user":
                return "\n".join(part_texts(content.get("parts")))
        return ""

    def newest_input_text(self, body: dict[str, Any]) -> str:
        """Everything after the model's last turn: what a scripted model acts on."""
        pieces: list[str] = []
        for content in reversed(body.get("contents") or []):
            if not isinstance(content, dict) or content.get("role") == "model":
                break
            pieces[:0] = part_texts(content.get("parts"))
        return "\n".join(pieces)

    def conversation_requests(self) -> list[RecordedRequest]:
        """The model requests of the session's own turns (those that offer tools), without side calls."""
        return [r for r in self.model_requests() if r.body.get("tools")]

    def handle_get(self, h: Handler, req: RecordedRequest) -> None:
        if route(req.path).endswith("/models"):
            model = {"name": f"models/{MODEL}", "supportedGenerationMethods": ["generateContent"]}
            return h.send_json(200, {"models": [model]})
        return h.send_json(404, {"error": {"message": f"mock: no route {req.path}"}})

    def handle_post(self, h: Handler, req: RecordedRequest) -> None:
        if route(req.path).endswith(":countTokens"):
            return h.send_json(200, {"totalTokens": 10})
        if not self.is_generation_path(req.path):
            return h.send_json(404, {"error": {"message": f"mock: no route {req.path}"}})
        config = req.body.get("generationConfig") or {}
        call = None
        if config.get("responseMimeType") == "application/json":
            schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
            parts: list[dict[str, Any]] = [{"text": json.dumps(fill(schema))}]
        else:
            if req.body.get("tools"):
                text = self.with_scripts(self.newest_input_text(req.body))
                call = scripted_call_args(text, {"$MESSAGE_ID": ENVELOPE_ID_RE})
            if call is not None:
                self.function_calls.append({"name": call[0], "args": call[1], "at": time.time()})
                parts = [{"functionCall": {"name": call[0], "args": call[1]}}]
            else:
                parts = [{"text": self.answer(req.body)}]
        resp = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": MODEL, "responseId": f"mock-{time.time_ns()}",
        }  # fmt: skip
        if route(req.path).endswith(":generateContent"):
            return h.send_json(200, resp)
        h.start_sse()
        h.send_event(resp)
        return None
