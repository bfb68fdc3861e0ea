"""Codex (HARNESSES.md): identity from each tools/call's `_meta.threadId`, binding to the app-server that has the
thread loaded and delivery by turn/start or thread/inject_items (harness/codex/adapter.py), install."""

from crosstalk.harness.codex.kind import KIND, CodexKind

__all__ = ["KIND", "CodexKind"]
