"""What every subcommand shares: exit codes, one-line errors on stderr, the state root, JSON output."""

from __future__ import annotations

import sys

from crosstalk.core.errors import CrosstalkError, ErrorKind

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn


class Fail(CrosstalkError):
    """Ends the command with one line on stderr (`crosstalk: <message>`) and the exit code of its kind (the table in
    crosstalk.core.errors; README "Exit codes"). The command says the kind, so it is given per instance."""

    def __init__(self, message: str, code: ErrorKind = ErrorKind.FAILED) -> None:
        super().__init__(message)
        self.code = code


class Unsupported(CrosstalkError):
    """A parser definition that cli/fastparse.py cannot follow exactly as argparse does (it declines: argparse
    parses the line)."""


def fail(message: str, code: ErrorKind = ErrorKind.FAILED) -> NoReturn:
    raise Fail(message, code)


def state_paths() -> Any:
    from crosstalk.registry.paths import StatePaths

    return StatePaths.from_env()


def echo(text: str = "", *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")


def print_json(data: Any) -> None:
    from crosstalk.core.jsonc import dumps  # json.dumps without importing json (re, enum): send prints with it

    sys.stdout.write(dumps(data, ensure_ascii=False) + "\n")
    sys.stdout.flush()
