"""The `crosstalk` command line: parse (cli/parser.py, argparse; an ordinary `crosstalk send` by cli/fastparse.py
without it), run the subcommand's module, and turn its errors into one line on stderr and an exit code.

Nothing here imports argparse at the top: `crosstalk send` is run by hooks and scripts for every message, and its
start-up budget is 2x the bare interpreter's (docs/performance.md, "Lean send path").
"""

from __future__ import annotations

import os
import sys

from crosstalk.core.errors import CrosstalkError, ErrorKind, exit_code

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

# Subcommands whose process serves agents: `crosstalk capture` may record their traffic with the harness.
_SERVES_AGENTS = ("agent", "mcp", "pi-agent", "demo")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI. Every error is one line on stderr: `crosstalk: <what is wrong>`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args: Any = None
    if argv[:1] == ["send"]:
        from crosstalk.cli.fastparse import parse_send

        args = parse_send(argv[1:])  # None: not an ordinary send line, so argparse parses it (its help, its errors)
    parser = None
    if args is None:
        from crosstalk.cli.parser import parse

        parser, args = parse(argv)
    target = getattr(args, "run", None)
    if target is None:
        # `crosstalk` or `crosstalk agent` alone: a command is missing, so show what there is to run (a usage
        # error: exit 2, the help on stderr).
        from crosstalk.cli.parser import subcommand

        assert parser is not None  # `send` always has its command
        sub = parser if args.command is None else subcommand(parser, args.command)
        sub.print_help(sys.stderr)
        sys.exit(exit_code(ErrorKind.USAGE))
    if args.command in _SERVES_AGENTS:
        from crosstalk.capture.tap import install

        install()
    module, attr = target.split(":")
    try:
        __import__(module)  # not importlib.import_module: `importlib` is ~0.5 ms of send's start-up
        code = getattr(sys.modules[module], attr)(args)
    except CrosstalkError as exc:  # a Fail, or an error no command turned into one: its kind says the exit code
        sys.stderr.write(f"crosstalk: {exc.message}\n")
        sys.exit(exit_code(exc.code))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(exit_code(ErrorKind.FAILED))
    sys.exit(code or 0)


def script() -> None:
    """The `crosstalk` command (bin/crosstalk): `main()`, and for `crosstalk send` a quick exit. A send loads no
    thread and registers no exit handler, so once stdout and stderr are flushed there is nothing left for the
    interpreter's shutdown to do but tear its modules down, ~3 ms on send's start-up budget of twice a bare start
    (docs/performance.md, "Lean send path"): the process ends there with `os._exit` and the command's exit code.
    Anything else (another command, a thread or an exit handler loaded after all, a code that is not a number, a
    flush that fails) takes the interpreter's own exit as before."""
    try:
        main()
    except SystemExit as exc:
        code = exc.code
        if sys.argv[1:2] == ["send"] and (code is None or isinstance(code, int)) and _nothing_to_shut_down():
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                raise exc from None  # the interpreter's exit reports it as it always has
            os._exit(code or 0)
        raise


def _nothing_to_shut_down() -> bool:
    import atexit

    return "threading" not in sys.modules and atexit._ncallbacks() == 0
