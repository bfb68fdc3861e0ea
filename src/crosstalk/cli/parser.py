"""The `crosstalk` command line's argparse parser: the one definition of every subcommand, its options and its help.

Built on argparse rather than click: `crosstalk send` is run by hooks and scripts for every message, and its
start-up budget is a few times the bare interpreter's. click costs ~16 ms to import here (it pulls in inspect and
its type system) against ~6 ms for argparse, which was the difference between missing and meeting that budget
(docs/performance.md). Subcommand implementations load lazily, so `send` never imports asyncio, the journal or the
agent runtime; an ordinary `crosstalk send` is parsed without argparse at all (cli/fastparse.py, from send's
definition here).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from crosstalk import __version__
from crosstalk import harness as harness_kinds
from crosstalk.cli.argtypes import non_negative_int, positive_float
from crosstalk.core.errors import ErrorKind, exit_code

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with errors on one line: `crosstalk: <problem> (see 'crosstalk <cmd> --help')`."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"crosstalk: {message} (see '{self.prog} --help')\n")
        sys.exit(exit_code(ErrorKind.USAGE))

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse's own asks shutil for the width, and importing shutil (bz2, lzma, fnmatch) costs ~2 ms on
        # `crosstalk send`'s start-up path, where every add_argument makes a formatter; the same width, read here.
        return self.formatter_class(prog=self.prog, width=_terminal_columns() - 2)  # type: ignore[call-arg]


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns without importing shutil: $COLUMNS, else the terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return columns


_HELP = {
    "send": "Send a message to a live agent by name or agent_id.",
    "list": "List the live agents on this machine.",
    "who": "Show one agent's descriptor.",
    "tail": "Follow one agent's traffic live.",
    "agent": "Run a standalone agent.",
    "demo": "Real Claude Code, Codex and pi sessions (else fake agents) exchanging messages, live and over a git bus.",
    "mcp": "Serve the crosstalk tools to a Claude Code or Codex session (stdio MCP server).",
    "install": "Set crosstalk up for a harness: register `crosstalk mcp` with it, and its skill.",
    "uninstall": "Undo `crosstalk install` for a harness.",
    "pi-agent": "The core the crosstalk pi extension starts for one pi session (not for use by hand).",
    "capture": "Record one agent's raw traffic with its harness, redacted, into a file for a bug report.",
    # The git bus (protocol v7).
    "transport": "Create, join, list and remove git transports (the bus).",
    "channel": "Create, list, rename and delete channels in a transport.",
    "message": "Send a message on the bus, and see which have replies.",
    "chat": "Talk with a bus model, turn by turn, from a terminal.",
    "workflow": "Run a workflow (fan out to models, synthesize), and see its progress.",
    "server": "Start, stop and watch this machine's background dispatcher for a transport.",
    "daemon": "The dispatcher itself (run by 'server start' or systemd).",
    "status": "A transport at a glance: channels, dispatcher heartbeat, claimed models, errors.",
    "logs": "Show or follow this machine's dispatcher log for a transport.",
    "settings": "Show the effective bus settings on this machine.",
    "model": "Add, list and remove the models of a transport's registry (data/crosstalk.yaml).",
    "version": "Print crosstalk's version and the bus protocol version.",
    "doctor": "Check harnesses, installs, the state root and transports; say what to run to fix each problem.",
    "watch": "A live view of every agent here, their traffic, and each bus transport's dispatcher.",
    "gemini": "Gemini CLI helpers (its remote agents' auth: `gemini token`).",
    "relay": "Join this machine to a NATS relay, see its state, leave it, or run its relay process.",
}
# Subcommands whose parser lives in crosstalk.cli.<noun>_cmd (its add_parser(sub)); a new command adds its help
# line above and its noun here.
_MODULE_NOUNS = (
    "transport", "channel", "message", "chat", "workflow", "server", "daemon", "status", "logs", "settings", "version",
    "doctor",
    "watch",
    "capture",
    "model",
    "agent",
    "gemini",
    "relay",
)  # fmt: skip


def build_parser(only: str | None = None) -> Parser:
    """The whole parser, or (for speed) one whose subcommands carry arguments only for `only`."""
    parser = Parser(
        prog="crosstalk",
        description="crosstalk: messages between live AI coding-agent sessions, by name. State lives under "
        "$CROSSTALK_HOME (default: $XDG_STATE_HOME/crosstalk or ~/.local/state/crosstalk).",
        epilog="Exit codes: 0 accepted or queued, 1 wire/protocol error or unknown outcome, 2 usage, "
        "3 rejected, 4 no such agent or unreachable.",
    )
    parser.add_argument("--version", action="version", version=f"crosstalk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    adders = {
        "send": _send, "list": _list, "who": _who, "tail": _tail, "demo": _demo, "mcp": _mcp,
        "install": _install, "uninstall": _uninstall, "pi-agent": _pi_agent,
    }  # fmt: skip
    for name, adder in adders.items():
        if only is None or only == name:
            adder(sub)
        else:
            sub.add_parser(name, help=_HELP[name])  # listed in help; its arguments are never needed this run
    for name in _MODULE_NOUNS:
        if only is None or only == name:
            importlib.import_module(f"crosstalk.cli.{name}_cmd").add_parser(sub)
        else:
            sub.add_parser(name, help=_HELP[name])
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, if any (so only its arguments need building)."""
    for token in argv:
        if not token.startswith("-"):
            return token if token in _HELP else None
        if token in ("-h", "--help", "--version"):
            return None
    return None


def _send(sub: Any) -> None:
    importlib.import_module("crosstalk.cli.send_cmd").add_parser(sub)  # its module, as for _MODULE_NOUNS


def _list(sub: Any) -> None:
    p = sub.add_parser("list", help="List the live agents on this machine.")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print a JSON array of descriptors.")
    p.add_argument(
        "--all",
        dest="include_stale",
        action="store_true",
        help="Include descriptors whose process is gone, and the agents of every machine on the relay (NAME@ALIAS).",
    )
    p.set_defaults(run="crosstalk.cli.list_cmd:run_list")


def _who(sub: Any) -> None:
    p = sub.add_parser("who", help="Show one agent's descriptor.")
    p.add_argument("target", metavar="TARGET")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the descriptor as JSON.")
    p.set_defaults(run="crosstalk.cli.list_cmd:run_who")


def _tail(sub: Any) -> None:
    p = sub.add_parser(
        "tail",
        help="Follow one agent's traffic live.",
        description="Follow TARGET's traffic: a live agent's name or agent_id, or the agent_id of a stopped one.",
    )
    p.add_argument("target", metavar="TARGET")
    p.add_argument(
        "-n",
        "--lines",
        dest="backlog",
        type=non_negative_int(0),
        default=10,
        help="Show this many earlier records first (default 10).",
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="Print raw journal records as JSON lines.")
    p.add_argument("--count", type=non_negative_int(1), help="Exit after this many new records.")
    p.add_argument("--for", dest="duration", type=positive_float(0.0, 1e9), help="Exit after this many seconds.")
    p.set_defaults(run="crosstalk.cli.tail_cmd:run")


def _demo(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="Run agents in a temporary state root and exchange messages.",
        description="Start real Claude Code, Codex and pi sessions (their models: scripted model servers on "
        "127.0.0.1, no outside service) when the CLIs are found, else fake-harness agents; exchange messages "
        "through their real sockets, print every delivery with its state, then clean up.",
    )
    p.add_argument(
        "--harness-bin",
        metavar="DIR",
        help="The directory holding the claude, codex and pi executables (default: find them on PATH).",
    )
    p.set_defaults(run="crosstalk.cli.demo_cmd:run")


def _mcp(sub: Any) -> None:
    from crosstalk.cli.mcp_cmd import SETUP

    p = sub.add_parser(
        "mcp",
        help=_HELP["mcp"],
        description="Speak MCP (JSON-RPC over stdin/stdout) to the harness that started this process and serve "
        f"the crosstalk tools to its model. Set it up once per harness: {SETUP}. Logs go to stderr only.",
    )
    p.add_argument(
        "--harness",
        choices=harness_kinds.choices(),
        default=harness_kinds.AUTO,
        help="Which harness started this server (default auto: told apart per call by what it sends).",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="Log every message to stderr.")
    p.set_defaults(run="crosstalk.cli.mcp_cmd:run")


def _install(sub: Any, verb: str = "install") -> None:
    p = sub.add_parser(verb, help=_HELP[verb])
    what = "set up" if verb == "install" else "remove crosstalk from"
    p.add_argument("harness", choices=harness_kinds.installable(), help=f"The harness to {what}.")
    p.add_argument(
        "--scope",
        default="user",
        help="user (default: every session of yours) or project (the current directory's .mcp.json).",
    )
    if verb == "install":
        p.add_argument(
            "--native-peers",
            action="store_true",
            help="Also publish every other crosstalk agent on this machine as a native peer of this harness "
            "(Claude's own ListAgents and SendMessage then reach it). uninstall turns it off.",
        )
    p.add_argument("--json", dest="as_json", action="store_true", help="Print what changed as JSON.")
    p.set_defaults(run=f"crosstalk.cli.install_cmd:run_{verb}")


def _uninstall(sub: Any) -> None:
    _install(sub, "uninstall")


def _pi_agent(sub: Any) -> None:
    p = sub.add_parser(
        "pi-agent",
        help=_HELP["pi-agent"],
        description="Host one pi session's agent for the crosstalk pi extension, speaking the pi link (one JSON "
        "object per line) on stdin/stdout; see docs/dev/pi-link.md. The extension starts it; logs go to stderr.",
    )
    p.add_argument("--session", required=True, help="The pi session id.")
    p.add_argument("--cwd", required=True, help="The pi session's working directory.")
    p.set_defaults(run="crosstalk.cli.pi_cmd:run_pi_agent")


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand `name` (argparse keeps it only in its subparsers action)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


def send_parser() -> Parser:
    """The parser `crosstalk send` builds alone: what `sub.add_parser("send")` in build_parser makes."""
    send_cmd = importlib.import_module("crosstalk.cli.send_cmd")
    send = Parser(prog="crosstalk send", description=send_cmd.DESCRIPTION)
    send_cmd.add_arguments(send)
    return send


def parse(argv: list[str]) -> tuple[Parser | None, argparse.Namespace]:
    """The parsed command line, and the whole parser (None for `send`, which never needs it: only its own parser is
    built, ~10 ms less on the start-up path of the command run most, as argparse asks gettext for its words in every
    subcommand's parser). `send` parses intermixed, so its options may come before TEXT as well as after it (plain
    argparse binds TARGET and the optional TEXT together and then refuses a TEXT that follows an option)."""
    if argv and argv[0] == "send":
        args = send_parser().parse_intermixed_args(argv[1:])
        args.command = "send"
        return None, args
    parser = build_parser(_command_of(argv))
    return parser, parser.parse_args(argv)
