"""Gemini CLI (docs/dev/gemini-adapter.md): identity from the record crosstalk's hook keeps for the shim's parent
process, delivery through Gemini's own hooks (AfterTool and BeforeAgent `additionalContext`) from a queue the
session's shim holds, and every hand-over settled through the late-outcome path."""

from crosstalk.harness.gemini.kind import KIND, GeminiKind

__all__ = ["KIND", "GeminiKind"]
