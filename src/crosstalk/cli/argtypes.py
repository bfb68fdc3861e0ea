"""The value types of the CLI's numeric options (argparse `type=`): a bad value raises argparse's
ArgumentTypeError with a readable message. argparse itself is imported only for that error, so `crosstalk send`'s
fast parse (cli/fastparse.py) can convert with these without loading it."""

from __future__ import annotations

# `typing` / `collections.abc` are only needed by type checkers; importing them costs ms on `crosstalk send`'s
# start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def _bad(message: str) -> Exception:
    from argparse import ArgumentTypeError

    return ArgumentTypeError(message)


def positive_float(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _bad(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise _bad(f"{value} is not between {low} and {high}")
        return value

    return parse


def non_negative_int(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise _bad(f"{text!r} is not a whole number") from None
        if maximum is not None and not minimum <= value <= maximum:
            raise _bad(f"{value} is not between {minimum} and {maximum}")
        if value < minimum:
            raise _bad(f"{value} is below {minimum}")
        return value

    return parse
