"""What the bus commands share: --transport, opening the transport, BusError -> Fail, typed confirmations."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from crosstalk.bus.errors import BusError
from crosstalk.bus.transport.transports import Transport, resolve_transport
from crosstalk.cli.common import Fail
from crosstalk.core.errors import ErrorKind


def add_transport_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--transport",
        metavar="NAME|DIR",
        help="The transport to act on (default: the one containing the current directory, else the only one known).",
    )


def as_fail(exc: BusError) -> Fail:
    """The CLI's failure for a bus error: its message, and its kind (a usage error when the user fixes it by changing
    the command line)."""
    return Fail(exc.message, exc.code)


@contextlib.contextmanager
def bus_errors() -> Iterator[None]:
    """Turn any BusError raised inside into the CLI's one-line failure."""
    try:
        yield
    except BusError as exc:
        raise as_fail(exc) from None


def open_transport(args: argparse.Namespace) -> Transport:
    """The transport this command acts on (resolved and version-checked), or Fail."""
    with bus_errors():
        return resolve_transport(Path.cwd(), getattr(args, "transport", None), os.environ)


def confirm_typed(what: str, name: str, yes: str | None) -> None:
    """Demand the exact name before a destructive step: --yes NAME for scripts, else typed at a terminal."""
    if yes is not None:
        if yes != name:
            raise Fail(f"--yes {yes!r} does not match {what} {name!r}; nothing was deleted", ErrorKind.USAGE)
        return
    if not sys.stdin.isatty():
        raise Fail(
            f"refusing to delete {what} {name!r} without confirmation: stdin is not a terminal; pass --yes {name}",
            ErrorKind.USAGE,
        )
    sys.stderr.write(f"This deletes {what} {name!r}. Type its name to confirm: ")
    sys.stderr.flush()
    typed = sys.stdin.readline().rstrip("\r\n")
    if typed != name:
        raise Fail(f"confirmation did not match {what} {name!r}; nothing was deleted", ErrorKind.USAGE)
