"""What every subcommand shares: exit codes, one-line errors on stderr, the state root, JSON output."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

# Exit codes (README "Exit codes").
EXIT_OK = 0  # accepted or queued
EXIT_WIRE = 1  # wire or protocol error, or an unknown outcome
EXIT_USAGE = 2  # bad arguments (click uses 2 as well)
EXIT_REJECTED = 3  # the receiver refused the message (the reason is printed)
EXIT_NO_AGENT = 4  # no such agent, or it is unreachable


class Fail(click.ClickException):
    """An error that ends the command with one line on stderr and a chosen exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_WIRE) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"crosstalk: {self.format_message()}", err=True)


def fail(message: str, exit_code: int = EXIT_WIRE) -> NoReturn:
    raise Fail(message, exit_code)


def state_paths() -> Any:
    from crosstalk.registry.paths import StatePaths

    return StatePaths.from_env()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=None) + "\n")
    sys.stdout.flush()
