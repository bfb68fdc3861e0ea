"""Codex (HARNESSES.md): identity from each tools/call's `_meta.threadId`. Binding to app-server endpoints,
discovery of loaded threads and delivery land with the Codex adapter; until then its adapter refuses honestly
through the seam."""

from crosstalk.harness.codex.kind import KIND, CodexKind

__all__ = ["KIND", "CodexKind"]
