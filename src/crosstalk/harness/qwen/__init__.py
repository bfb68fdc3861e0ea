"""Qwen Code (docs/dev/qwen-adapter.md): identity from the live registry record of the shim's parent process,
discovery of every live session record, supersession on `/clear` and `/resume`, delivery into the shim's own session
through its inbox with the child token, into sessions without crosstalk as Qwen's own peers write, and every
outcome from the session's delivery receipts."""

from crosstalk.harness.qwen.kind import KIND, QwenKind

__all__ = ["KIND", "QwenKind"]
