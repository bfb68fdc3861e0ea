"""`crosstalk demo`."""

from __future__ import annotations

import sys

import click

from crosstalk.cli.common import fail


@click.command()
def demo() -> None:
    """Start fake-harness agents in a temporary state root, exchange messages through their real sockets,
    print every delivery with its state, then clean everything up. Needs no outside service."""
    from crosstalk.core.errors import CrosstalkError
    from crosstalk.demo import run_demo

    try:
        code = run_demo(lambda line: click.echo(line))
    except (CrosstalkError, RuntimeError, OSError) as exc:
        fail(f"demo failed: {exc}")
    sys.exit(code)
