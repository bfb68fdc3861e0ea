"""Mock of the OpenAI Chat Completions API (POST /v1/chat/completions, SSE or JSON) for pi.

Scripted like the other mocks by the text the model reads in the newest user or tool message: `CALL <tool>
<json>` answers with a call of that tool (`$MESSAGE_ID` in the JSON stands for the id of the newest crosstalk
tag `[ask from … · id <id>]` in that text), `SLEEP <seconds>` delays the answer (a slow turn, during which pi is
streaming). Anything else is answered with text (the digest, or `reply`). Every tool call sent is in `tool_calls`.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from typing import Any, ClassVar

from .base import Handler, RecordedRequest, ScriptedModelServer, scripted_call_args, text_parts

ASK_ID_RE = re.compile(r"\[ask from [^\]]* · id ([0-9a-f-]{36})\]")


class ScriptedChat(ScriptedModelServer):
    name: ClassVar[str] = "chat"
    generation_path: ClassVar[str] = "/chat/completions"

    def __init__(self, reply: str | None = None) -> None:
        super().__init__(reply)
        self.tool_calls: list[dict[str, Any]] = []
        self._calls_lock = threading.Lock()

    def newest_user_text(self, body: dict[str, Any]) -> str:
        for msg in reversed(body.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") == "user":
                return text_parts(msg.get("content"))
        return ""

    def newest_input_text(self, body: dict[str, Any]) -> str:
        """The newest user or tool message's text: what a scripted model acts on."""
        for msg in reversed(body.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") in ("user", "tool"):
                return text_parts(msg.get("content"))
            if isinstance(msg, dict) and msg.get("role") == "assistant":
                return ""  # the model already answered the newest input
        return ""

    def scripted_call(self, text: str) -> tuple[str, dict[str, Any]] | None:
        return scripted_call_args(self.with_scripts(text), {"$MESSAGE_ID": ASK_ID_RE})

    def handle_post(self, h: Handler, req: RecordedRequest) -> None:
        if not self.is_generation_path(req.path):
            return h.send_json(404, {"error": {"message": f"mock: no route {req.path}"}})
        call = self.scripted_call(self.newest_input_text(req.body))
        base = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:12],
            "created": int(time.time()),
            "model": req.body.get("model", self.model),
        }
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if call is not None:
            name, args = call
            with self._calls_lock:
                self.tool_calls.append({"name": name, "arguments": args, "at": time.time()})
            tool_call = {"index": 0, "id": "call_" + uuid.uuid4().hex[:16], "type": "function",
                         "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
            delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
            finish = "tool_calls"
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
        else:
            text = self.answer(req.body)
            delta = {"role": "assistant", "content": text}
            finish = "stop"
            message = {"role": "assistant", "content": text}
        if not req.body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return h.send_json(200, {**base, "object": "chat.completion", "usage": usage, "choices": [choice]})
        chunk = {**base, "object": "chat.completion.chunk"}
        h.start_sse()
        h.send_event({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        h.send_event({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        h.send_event({**chunk, "choices": [], "usage": usage})
        h.send_event("[DONE]")
        return None


def chat_tool_result(req: RecordedRequest, name: str) -> dict[str, Any] | None:
    """The newest result of tool `name` a Chat Completions request carries, parsed from its JSON text, or None."""
    found = None
    msgs = [m for m in req.body.get("messages") or [] if isinstance(m, dict)]
    names = {c.get("id"): c.get("function", {}).get("name") for m in msgs
             for c in m.get("tool_calls") or [] if isinstance(c, dict)}  # fmt: skip
    for m in msgs:
        if m.get("role") == "tool" and names.get(m.get("tool_call_id")) == name:
            text = text_parts(m.get("content"))
            with contextlib.suppress(ValueError):
                found = json.JSONDecoder().raw_decode(text[text.find("{") :])[0] if "{" in text else found
    return found if isinstance(found, dict) else None
