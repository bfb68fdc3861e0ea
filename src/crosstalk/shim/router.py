"""The seam between the MCP wire protocol and the tools: the protocol layer knows only this interface."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a tools/call carries besides its arguments: the evidence a tool binds its caller's identity from."""

    meta: Mapping[str, Any] = field(default_factory=dict)  # params._meta of the tools/call (Codex: threadId)
    client_info: Mapping[str, Any] = field(default_factory=dict)  # initialize's clientInfo (name, version)
    parent_pid: int = 0  # the shim's parent process (a Claude session's pid)
    request_id: str | int | None = None


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's answer: compact JSON a model can act on. The protocol layer sends it as one text content block
    (the JSON) plus structuredContent, with isError set for errors the model should see."""

    data: Mapping[str, Any]
    is_error: bool = False


class ToolRouter(Protocol):
    def tools(self) -> list[dict[str, Any]]:
        """MCP tool definitions: name, description, inputSchema (JSON Schema), optional outputSchema."""
        ...

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        """Run one tool. Unknown names and invalid arguments come back as ToolResult(is_error=True) with a reason."""
        ...

    async def close(self) -> None:
        """stdin closed: stop every agent this shim serves (remove own descriptors, sockets, keys)."""
        ...
