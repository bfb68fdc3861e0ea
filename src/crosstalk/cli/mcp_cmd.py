"""`crosstalk mcp`: the stdio MCP server a harness session starts (the shim; ARCHITECTURE.md decision 9).

The router is `crosstalk.shim.tools.build_router(harness)`. `--router MODULE:ATTR` (hidden; for tests) serves another
router instead: ATTR is a ToolRouter, or a class or callable taking the harness string and returning one.
`CROSSTALK_MCP_ROUTER=MODULE:ATTR` does the same (bench/shim_startup.py serves `_NoTools` that way to time the
protocol layer alone).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from crosstalk.shim.router import CallContext, ToolResult, ToolRouter

ROUTER_ENV = "CROSSTALK_MCP_ROUTER"
# How a person registers this server with a harness: the one source for `crosstalk mcp --help`, and the lines the
# README shows (a test holds them to it).
SETUP_COMMANDS = ("crosstalk install claude", "crosstalk install codex")
SETUP = f"`{SETUP_COMMANDS[0]}` (Claude Code) or `{SETUP_COMMANDS[1]}` (Codex)"


class _NoTools:
    """A router with no tools (the protocol layer alone): lists nothing, answers every call with an error."""

    def __init__(self, harness: str = "auto") -> None:
        self.harness = harness

    def tools(self) -> list[dict[str, Any]]:
        return []

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        from crosstalk.shim.router import ToolResult

        return ToolResult({"state": "error", "reason": "no tools", "tool": name}, is_error=True)

    async def close(self) -> None:
        return None


def _load(spec: str, harness: str) -> ToolRouter:
    import importlib

    module, _, attr = spec.partition(":")
    if not module or not attr:
        from crosstalk.cli.common import fail
        from crosstalk.core.errors import ErrorKind

        fail(f"--router {spec!r}: expected MODULE:ATTR", ErrorKind.USAGE)
    obj = getattr(importlib.import_module(module), attr)
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "tools")):
        obj = obj(harness)  # a class or a factory
    return obj


def build(harness: str, router_spec: str | None = None) -> ToolRouter:
    """The router `crosstalk mcp` serves."""
    spec = router_spec or os.environ.get(ROUTER_ENV)
    if spec:
        return _load(spec, harness)
    from crosstalk.shim.tools import build_router

    return build_router(harness)


def daemon_executor() -> Any:
    import concurrent.futures
    import threading

    class _DaemonExecutor(concurrent.futures.ThreadPoolExecutor):  # asyncio accepts only this type
        """asyncio.to_thread's executor in the shim: each call on a daemon thread of its own. A blocking call still
        running when stdin closes (discovery asking an app-server that does not answer) is abandoned, never waited
        for: the shim exits once its agents are closed. shutdown() does not wait, and nothing joins the threads."""

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
            fut: concurrent.futures.Future[Any] = concurrent.futures.Future()

            def call() -> None:
                if not fut.set_running_or_notify_cancel():
                    return
                try:
                    fut.set_result(fn(*args, **kwargs))
                except BaseException as exc:
                    fut.set_exception(exc)

            threading.Thread(target=call, name="crosstalk-blocking", daemon=True).start()
            return fut

        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            return None

    return _DaemonExecutor()


def run(args: Any) -> int:
    """`crosstalk mcp`: serve MCP on stdin/stdout until stdin closes."""
    import logging

    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="crosstalk mcp[%(process)d] %(levelname)s %(name)s: %(message)s",
    )
    import asyncio

    from crosstalk.shim.protocol import serve_stdio

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(daemon_executor())
        await serve_stdio(build(args.harness, args.router))

    asyncio.run(main())
    return 0
