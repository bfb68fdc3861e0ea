"""Scripted model servers on 127.0.0.1 for the Anthropic Messages, OpenAI Responses, Chat Completions and Gemini
APIs: the real harness CLIs run against them offline (`crosstalk demo`, the e2e tests). A model request is answered
from its newest user text: a `CALL <tool> <json>` line makes the tool call, a `SLEEP <seconds>` line delays the
answer, else the text is echoed back as a digest."""

from .anthropic import ScriptedAnthropic
from .base import REPLY_PREFIX, RecordedRequest, ScriptedModelServer, digest_reply
from .chat import ScriptedChat
from .gemini import ScriptedGemini
from .qwen import ScriptedQwenChat
from .responses import ScriptedResponses

__all__ = [
    "REPLY_PREFIX",
    "RecordedRequest",
    "ScriptedAnthropic",
    "ScriptedChat",
    "ScriptedGemini",
    "ScriptedModelServer",
    "ScriptedQwenChat",
    "ScriptedResponses",
    "digest_reply",
]
