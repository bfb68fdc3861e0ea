"""Claude Code (HARNESSES.md): identity from the session registry record of the shim's parent process, discovery of
every live session record, supersession on `/clear`, renames followed. Delivery into sessions lands with the Claude
adapter; until then its adapter refuses honestly through the seam."""

from crosstalk.harness.claude.kind import KIND, ClaudeKind

__all__ = ["KIND", "ClaudeKind"]
