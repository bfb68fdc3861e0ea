"""Claude Code (HARNESSES.md): identity from the session registry record of the shim's parent process, discovery of
every live session record, supersession on `/clear`, renames followed, and delivery into the shim's own session
through its messaging socket (harness/claude/adapter.py)."""

from crosstalk.harness.claude.kind import KIND, ClaudeKind

__all__ = ["KIND", "ClaudeKind"]
