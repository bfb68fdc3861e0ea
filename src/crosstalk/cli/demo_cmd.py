"""`crosstalk demo`."""

from __future__ import annotations

from typing import Any

from crosstalk.cli.common import echo, fail


def run(args: Any) -> int:
    """Start fake-harness agents in a temporary state root, exchange messages through their real sockets,
    print every delivery with its state, then clean everything up. Needs no outside service."""
    from crosstalk.core.errors import CrosstalkError
    from crosstalk.demo.live import run_demo

    try:
        return run_demo(echo)
    except (CrosstalkError, RuntimeError, OSError) as exc:
        fail(f"demo failed: {exc}")
