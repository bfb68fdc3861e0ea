"""A ToolRouter served the way `crosstalk mcp` serves its own (crosstalk.cli.mcp_cmd.serve), for the protocol tests.

Run as `python tests/support/shim_router.py [--harness H] [-v]`.

Tools: echo, fail (is_error result), boom (raises), slow (sleeps; records its cancellation), whoami (returns the
CallContext). Marks go to files in $XT_SHIM_DIR: `pid` at import, `cancelled-<request id>`, `closed` on close().
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crosstalk.shim.router import CallContext, ToolResult

MARKS = Path(os.environ.get("XT_SHIM_DIR", "/tmp"))
(MARKS / "pid").write_text(str(os.getpid()))

_OBJ = {"type": "object"}
TOOLS = [
    {
        "name": "echo",
        "description": "Echo the arguments back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "fail", "description": "Always a tool error.", "inputSchema": _OBJ},
    {"name": "boom", "description": "Raises.", "inputSchema": _OBJ},
    {
        "name": "slow",
        "description": "Sleep `seconds`, then answer.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    },
    {"name": "whoami", "description": "The call's context.", "inputSchema": _OBJ},
    {"name": "noisy", "description": "Prints to stdout, and so does a child process.", "inputSchema": _OBJ},
    {
        "name": "typed",
        "description": "Has an outputSchema.",
        "inputSchema": _OBJ,
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    },
]


class FakeRouter:
    instructions = "test router"

    def __init__(self, harness: str = "auto") -> None:
        self.harness = harness

    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        if name == "echo":
            return ToolResult({"state": "ok", "echo": dict(arguments)})
        if name == "fail":
            return ToolResult({"state": "error", "reason": "bad_thing", "hint": "try again"}, is_error=True)
        if name == "boom":
            raise RuntimeError("kaboom")
        if name == "slow":
            (MARKS / f"started-{ctx.request_id}").write_text("1")  # the tests wait for this, not for time to pass
            try:
                await asyncio.sleep(float(arguments.get("seconds", 30)))
            except asyncio.CancelledError:
                (MARKS / f"cancelled-{ctx.request_id}").write_text("1")
                raise
            return ToolResult({"state": "ok", "slept": arguments.get("seconds", 30)})
        if name == "whoami":
            return ToolResult(
                {
                    "meta": dict(ctx.meta),
                    "client_info": dict(ctx.client_info),
                    "parent_pid": ctx.parent_pid,
                    "request_id": ctx.request_id,
                    "harness": self.harness,
                }
            )
        if name == "noisy":
            import subprocess
            import sys

            print("NOISE from print()")
            sys.stdout.flush()
            os.write(1, b"NOISE on fd 1\n")
            subprocess.run(["echo", "NOISE from a child"], check=True, timeout=10)
            return ToolResult({"state": "ok"})
        if name == "typed":
            return ToolResult({"n": 7})
        return ToolResult({"state": "error", "reason": "unknown_tool"}, is_error=True)

    async def close(self) -> None:
        (MARKS / "closed").write_text(json.dumps({"harness": self.harness}))


def make(harness: str) -> FakeRouter:
    return FakeRouter(harness)


if __name__ == "__main__":
    import argparse
    import sys

    from crosstalk.cli.mcp_cmd import serve

    parser = argparse.ArgumentParser()
    parser.add_argument("--harness", default="auto")
    parser.add_argument("-v", "--verbose", action="store_true")
    cli = parser.parse_args()
    sys.exit(serve(lambda: make(cli.harness), verbose=cli.verbose))
