"""What every subcommand shares: exit codes, one-line errors on stderr, the state root, JSON output."""

from __future__ import annotations

import json
import sys

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn


# Exit codes (README "Exit codes").
EXIT_OK = 0  # accepted or queued
EXIT_WIRE = 1  # wire or protocol error, or an unknown outcome
EXIT_USAGE = 2  # bad arguments
EXIT_REJECTED = 3  # the receiver refused the message (the reason is printed)
EXIT_NO_AGENT = 4  # no such agent, or it is unreachable
EXIT_HELD = 5  # the receiving session holds the message for its user (`send --wait-held` waits for the decision)


class Fail(Exception):
    """Ends the command with one line on stderr (`crosstalk: <message>`) and the given exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_WIRE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def fail(message: str, exit_code: int = EXIT_WIRE) -> NoReturn:
    raise Fail(message, exit_code)


def state_paths() -> Any:
    from crosstalk.registry.paths import StatePaths

    return StatePaths.from_env()


def echo(text: str = "", *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    sys.stdout.flush()
