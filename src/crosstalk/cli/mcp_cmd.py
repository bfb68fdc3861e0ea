"""`crosstalk mcp`: the stdio MCP server a harness session starts (the shim, docs/dev/mcp-shim.md).

It serves `crosstalk.shim.tools.build_router(harness)` through `serve`, which sets up what every MCP server process
of crosstalk needs (logs on stderr, blocking calls on daemon threads) around shim.protocol.serve_stdio.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from crosstalk.shim.router import ToolRouter

# How a person registers this server with a harness: the one source for `crosstalk mcp --help`, and the lines the
# README shows (a test holds them to it).
SETUP_COMMANDS = ("crosstalk install claude", "crosstalk install codex")
SETUP = f"`{SETUP_COMMANDS[0]}` (Claude Code) or `{SETUP_COMMANDS[1]}` (Codex)"


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


# glibc mallopt parameters (malloc.h) and the values the shim sets.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
MALLOC_TUNING = ((M_ARENA_MAX, 1), (M_MMAP_THRESHOLD, 128 * 1024), (M_TRIM_THRESHOLD, 128 * 1024))


def tune_malloc() -> bool:
    """Keep the shim's resident memory flat under glibc (docs/dev/shim-memory.md). glibc gives each new thread a
    malloc arena of its own (up to 8 per core), and each keeps what its thread freed: the shim runs Python one thread
    at a time (the GIL) on short-lived threads (asyncio.to_thread) and the journal's flusher, so one arena serves
    them all. And glibc raises its mmap threshold to the largest block freed (a journal compaction's buffers), after
    which such blocks come from the heap and stay: fixed at glibc's defaults, large blocks go back to the system when
    freed. Call before any thread starts; False where there is no glibc (nothing changes)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        return all(libc.mallopt(param, value) == 1 for param, value in MALLOC_TUNING)
    except (OSError, AttributeError):
        return False


def serve(make_router: Callable[[], ToolRouter], *, verbose: bool = False) -> int:
    """Serve MCP on stdin/stdout until stdin closes, with the router `make_router` builds inside the event loop."""
    import logging

    tune_malloc()
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.WARNING,
        format="crosstalk mcp[%(process)d] %(levelname)s %(name)s: %(message)s",
    )
    import asyncio

    from crosstalk.shim.protocol import serve_stdio

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(daemon_executor())
        await serve_stdio(make_router())

    asyncio.run(main())
    return 0


def run(args: Any) -> int:
    """`crosstalk mcp`: serve the crosstalk tools for `--harness`."""
    from crosstalk.shim.tools import build_router

    return serve(lambda: build_router(args.harness), verbose=args.verbose)
