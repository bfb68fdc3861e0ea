"""Gemini CLI (docs/dev/gemini-adapter.md): identity from the record crosstalk's hook keeps for the shim's parent
process, delivery through Gemini's own hooks (AfterTool and BeforeAgent `additionalContext`) from a queue the
session's shim holds, and every hand-over settled through the late-outcome path.

`KIND` is loaded on first use: Gemini runs crosstalk's hook (harness/gemini/hook.py, in this package) on every tool
call, and the hook needs none of the kind's imports."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: this module is on the path of a hook Gemini runs on every tool call
if TYPE_CHECKING:
    from typing import Any

__all__ = ["KIND", "GeminiKind"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from crosstalk.harness.gemini import kind

        return getattr(kind, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
