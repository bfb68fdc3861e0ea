"""`crosstalk send`'s command line parsed without argparse (argparse, gettext and locale are a bare interpreter
start again on the command run most), for the ordinary lines only.

The option table is not a second copy: it is read from send's one definition, `send_cmd.add_arguments`, called on
a recorder (`Spec`) instead of an argparse parser, and the line is parsed as argparse's `parse_intermixed_args`
parses it. Whatever this parser does not handle exactly as argparse does, it declines (returns None) and the caller
parses with argparse, so help and errors stay argparse's own, byte for byte: `-h`/`--help`, `--`, an unknown or
abbreviated option (argparse accepts unique prefixes), a value or positional that starts with '-' (argparse tells
negative numbers and options apart by rules of its own), a flag given `=VALUE`, a missing value, a value its type
or choices refuse, too few or too many positionals, and any add_argument this recorder does not know. The two are
held to the same answer by tests/unit/cli/test_cli_fastparse.py (hypothesis: random argv → the same namespace, or
declined).
"""

from __future__ import annotations

from crosstalk.cli.common import Unsupported

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any


class Namespace:
    """The parsed arguments, as attributes (what argparse.Namespace carries for these)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...  # any attribute the definition names

    def __repr__(self) -> str:
        return f"Namespace({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


class _Option:
    __slots__ = ("choices", "dest", "takes_value", "type")

    def __init__(self, dest: str, takes_value: bool, type_: Callable[[str], Any] | None, choices: Any) -> None:
        self.dest, self.takes_value, self.type, self.choices = dest, takes_value, type_, choices


class Spec:
    """The add_argument / set_defaults calls of a parser definition, recorded: long options that store a value or
    store_true, and positionals (required, or nargs='?'). Anything else raises Unsupported."""

    def __init__(self) -> None:
        self.positionals: list[tuple[str, bool]] = []  # (dest, required), in order
        self.options: dict[str, _Option] = {}  # by option string
        self.defaults: dict[str, Any] = {}

    def add_argument(self, *flags: str, **kw: Any) -> None:
        action = kw.pop("action", "store")
        dest = kw.pop("dest", None)
        type_ = kw.pop("type", None)
        choices = kw.pop("choices", None)
        default = kw.pop("default", None)
        nargs = kw.pop("nargs", None)
        kw.pop("help", None)
        kw.pop("metavar", None)
        if kw or not flags:
            raise Unsupported(f"add_argument{flags} with {sorted(kw)}")
        if not flags[0].startswith("-"):
            if len(flags) != 1 or dest is not None or action != "store" or nargs not in (None, "?"):
                raise Unsupported(f"positional {flags}")
            if type_ is not None or choices is not None:
                raise Unsupported(f"positional {flags} with a type or choices")
            self.positionals.append((flags[0], nargs is None))
            self.defaults[flags[0]] = default
            return
        if nargs is not None or any(not f.startswith("--") or "=" in f for f in flags):
            raise Unsupported(f"option {flags}: only long options with one value or none")
        if action == "store_true":
            if type_ is not None or choices is not None:
                raise Unsupported(f"option {flags}: store_true with a type or choices")
            takes_value, default = False, False if default is None else default
        elif action == "store":
            takes_value = True
            if isinstance(default, str) and type_ is not None:
                raise Unsupported(f"option {flags}: a string default that argparse would convert")
        else:
            raise Unsupported(f"option {flags}: action {action!r}")
        dest = dest or flags[0][2:].replace("-", "_")
        for flag in flags:
            self.options[flag] = _Option(dest, takes_value, type_, choices)
        self.defaults[dest] = default

    def set_defaults(self, **values: Any) -> None:
        self.defaults.update(values)

    def parse(self, argv: Sequence[str]) -> Namespace | None:
        """`argv` parsed as argparse's parse_intermixed_args would, or None where this parser declines."""
        values = dict(self.defaults)
        positional: list[str] = []
        tokens = iter(argv)
        for token in tokens:
            if not token.startswith("-") or token == "-":
                positional.append(token)
                continue
            name, eq, value = token.partition("=")
            option = self.options.get(name)
            if option is None:
                return None  # help, `--`, an unknown or abbreviated option, a negative number: argparse decides
            if not option.takes_value:
                if eq:
                    return None
                values[option.dest] = True
                continue
            if not eq:
                following = next(tokens, None)
                if following is None or (following.startswith("-") and following != "-"):
                    return None
                value = following
            if option.type is not None:
                try:
                    value = option.type(value)
                except Exception:
                    return None
            if option.choices is not None and value not in option.choices:
                return None
            values[option.dest] = value
        required = sum(1 for _dest, req in self.positionals if req)
        if not required <= len(positional) <= len(self.positionals):
            return None
        for (dest, _req), value in zip(self.positionals, positional, strict=False):
            values[dest] = value
        return Namespace(**values)


def send_spec() -> Spec | None:
    """`crosstalk send`'s definition, recorded (None if it uses what the recorder cannot parse)."""
    from crosstalk.cli.send_cmd import add_arguments

    spec = Spec()
    try:
        add_arguments(spec)
    except Unsupported:
        return None
    return spec


def parse_send(argv: Sequence[str]) -> Namespace | None:
    """`crosstalk send ARGV...` parsed, with `command` set as the whole parser sets it; None to parse with argparse."""
    spec = send_spec()
    if spec is None:
        return None
    spec.set_defaults(command="send")
    return spec.parse(argv)
