"""Local mock model servers for driving the real harness CLIs offline (see tests/e2e/conftest.py)."""

from .anthropic import MockAnthropic
from .base import REPLY_PREFIX, MockModelServer, RecordedRequest, digest_reply
from .chat import MockChat
from .responses import MockResponses

__all__ = [
    "REPLY_PREFIX",
    "MockAnthropic",
    "MockChat",
    "MockModelServer",
    "MockResponses",
    "RecordedRequest",
    "digest_reply",
]
