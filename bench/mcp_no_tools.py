"""`crosstalk mcp`'s protocol layer alone: crosstalk.cli.mcp_cmd.serve with a router that has no tools.

bench/shim_startup.py times it beside `crosstalk mcp`. Run as `python bench/mcp_no_tools.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from crosstalk.cli.mcp_cmd import serve
from crosstalk.shim.router import CallContext, ToolResult


class NoTools:
    """A router with no tools: lists nothing, answers every call with an error."""

    def tools(self) -> list[dict[str, Any]]:
        return []

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult({"state": "error", "reason": "no tools", "tool": name}, is_error=True)

    async def close(self) -> None:
        return None


if __name__ == "__main__":
    sys.exit(serve(NoTools))
