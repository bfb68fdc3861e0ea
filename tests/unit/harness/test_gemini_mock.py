"""The Gemini API mock the e2e tests run Gemini CLI against: SSE answers scripted by the newest input, side calls
that ask for JSON answered from their schema, every request recorded."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from crosstalk.demo.models.gemini import ScriptedGemini


def post(mock: ScriptedGemini, path: str, body: dict[str, Any]) -> bytes:
    req = urllib.request.Request(mock.base_url + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return bytes(resp.read())


def sse(raw: bytes) -> dict[str, Any]:
    line = next(x for x in raw.decode().splitlines() if x.startswith("data: "))
    return dict(json.loads(line[6:]))


def test_scripted_call_text_and_json_side_calls() -> None:
    tools = [{"functionDeclarations": [{"name": "mcp_crosstalk_send_message"}]}]
    path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    with ScriptedGemini() as mock:
        assert isinstance(mock, ScriptedGemini)
        prompt = {"role": "user", "parts": [{"text": 'go\nCALL mcp_crosstalk_send_message {"to": "b", "text": "hi"}'}]}
        call = sse(post(mock, path, {"contents": [prompt], "tools": tools}))
        part = call["candidates"][0]["content"]["parts"][0]
        assert part == {"functionCall": {"name": "mcp_crosstalk_send_message", "args": {"to": "b", "text": "hi"}}}
        result = {"role": "user", "parts": [{"functionResponse": {"name": "x", "response": {"output": "done"}}}]}
        model = {"role": "model", "parts": [part]}
        text = sse(post(mock, path, {"contents": [prompt, model, result], "tools": tools}))
        assert "MOCK-REPLY" in text["candidates"][0]["content"]["parts"][0]["text"]
        schema = {"type": "OBJECT", "properties": {"next_speaker": {"type": "STRING", "enum": ["user", "model"]}}}
        side = {"contents": [prompt], "generationConfig": {"responseMimeType": "application/json",
                                                            "responseJsonSchema": schema}}  # fmt: skip
        answer = json.loads(post(mock, "/v1beta/models/m:generateContent", side))
        assert json.loads(answer["candidates"][0]["content"]["parts"][0]["text"]) == {"next_speaker": "user"}
        assert json.loads(post(mock, "/v1beta/models/m:countTokens", {})) == {"totalTokens": 10}
        assert len(mock.model_requests()) == 3 and len(mock.conversation_requests()) == 2
        assert mock.wait_seen('"done"', timeout=1).body["contents"][2] == result
