"""`crosstalk chat MODEL[@machine]`: a conversation with a bus model from a plain terminal.

Each line typed is one message in the conversation's channel (`chat-<address>` unless --channel names one), `re:`
the model's last reply; the command waits for the answer (a spinner with the seconds waited, on a terminal), prints
it, and asks for the next line. The history stays in the channel: the last messages are shown at start, and a
second `chat` with the same model goes on where the first stopped. Ctrl-C while waiting stops the wait (the
answer will still land in the channel); Ctrl-D, `/quit` or Ctrl-C at the prompt ends the chat. Lines from a pipe
work too: one turn each, no prompt, no spinner.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from types import FrameType
from typing import Any

from crosstalk.cli.argtypes import positive_float
from crosstalk.cli.bus_common import add_transport_option, bus_errors, open_transport
from crosstalk.cli.common import Fail
from crosstalk.core.errors import ErrorKind

DEFAULT_TIMEOUT_S = 600.0
SPINNER = "|/-\\"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "chat",
        help="Talk with a bus model, turn by turn, from a terminal.",
        description="An interactive conversation with a bus model (MODEL, PROVIDER/MODEL, optionally @MACHINE) in "
        "one channel. Type a line, get the answer; Ctrl-D or /quit ends it.",
    )
    p.add_argument("to", metavar="MODEL[@MACHINE]")
    p.add_argument("--channel", metavar="HANDLE", help="The channel to talk in (default: chat-<address>).")
    p.add_argument("--from", dest="from_", metavar="NAME", help="Sender (default: $CROSSTALK_FROM, else $USER).")
    p.add_argument(
        "--timeout",
        type=positive_float(1, 86400),
        default=DEFAULT_TIMEOUT_S,
        help=f"Seconds to wait for each answer (default {DEFAULT_TIMEOUT_S:g}).",
    )
    p.add_argument("--history", type=int, default=10, metavar="N", help="Messages of history shown at start.")
    add_transport_option(p)
    p.set_defaults(run="crosstalk.cli.chat_cmd:run")


class Spinner:
    """`waiting for X … 3 s` on stderr, redrawn in place; nothing when stderr is not a terminal."""

    def __init__(self, who: str, enabled: bool) -> None:
        self.who, self.enabled, self.n, self.shown = who, enabled, 0, False

    def __call__(self, waited: float) -> None:
        if not self.enabled:
            return
        self.n += 1
        sys.stderr.write(f"\r{SPINNER[self.n % len(SPINNER)]} waiting for {self.who} … {waited:.0f} s ")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def run(args: argparse.Namespace) -> int:
    from crosstalk.bus.errors import BusError
    from crosstalk.bus.protocol.addressing import validate_address
    from crosstalk.bus.transport import chat
    from crosstalk.cli.message_cmd import sender_name

    try:
        validate_address(args.to)
    except BusError as exc:
        raise Fail(exc.message, ErrorKind.USAGE) from None
    sender = sender_name(args.from_)
    interactive = sys.stdin.isatty()
    transport = open_transport(args)
    with bus_errors():
        channel = chat.open_channel(transport, args.to, args.channel)
        past = chat.history(transport, channel, max(0, args.history))
    if interactive:
        print(f"chat with {args.to} in channel {channel.name} ({transport.name}); Ctrl-D or /quit to end", flush=True)
    for line in past:
        print(_render(line), flush=True)
    while True:
        text = _read_line(interactive)
        if text is None or text.strip() == "/quit":
            return 0
        if not text.strip():
            continue
        with bus_errors():
            rel = chat.say(transport, channel, args.to, sender, text.rstrip())
        spinner = Spinner(args.to, interactive and sys.stderr.isatty())
        interrupted: list[int] = []  # a plain list the SIGINT handler appends to: no lock a handler could deadlock on
        previous = signal.signal(signal.SIGINT, functools.partial(_note_signal, interrupted))  # ends the wait
        try:
            with bus_errors():
                stopped = lambda i=interrupted: bool(i)  # noqa: E731
                turn = chat.wait_reply(transport, rel, args.timeout, cancelled=stopped, tick=spinner)
        finally:
            signal.signal(signal.SIGINT, previous)
            spinner.clear()
        if turn.reply is None:
            why = "stopped waiting" if interrupted else f"no answer within {args.timeout:g} s"
            print(f"({why}; the answer will land in channel {channel.name}: {rel})", flush=True)
            continue
        print(_render(turn.reply), flush=True)


def _note_signal(seen: list[int], signum: int, _frame: FrameType | None) -> None:
    seen.append(signum)


def _read_line(interactive: bool) -> str | None:
    try:
        return input("you> ") if interactive else _stdin_line()
    except EOFError:
        if interactive:
            print()
        return None
    except KeyboardInterrupt:
        print()
        return None


def _stdin_line() -> str | None:
    line = sys.stdin.readline()
    return line if line else None


def _render(line: Any) -> str:
    if line.failed:
        return f"{line.sender}> error: {line.error or line.body}"
    return f"{line.sender}> {line.body}"
