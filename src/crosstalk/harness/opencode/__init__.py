"""The OpenCode harness: crosstalk's OpenCode plugin (integrations/opencode/crosstalk.js) stamps the calling session
into every crosstalk tool call and serves an inbox per OpenCode process; `crosstalk mcp --harness opencode` hosts
each session's agent and delivers through that inbox (docs/dev/opencode-adapter.md)."""

from crosstalk.harness.opencode.kind import KIND

__all__ = ["KIND"]
