"""`crosstalk logs [-f] [-n N]`: this machine's dispatcher log for a transport."""

from __future__ import annotations

import argparse
from typing import Any

from crosstalk.cli.argtypes import non_negative_int, positive_float
from crosstalk.cli.bus_common import add_transport_option, open_transport
from crosstalk.cli.common import echo


def add_log_options(p: argparse.ArgumentParser) -> None:
    add_transport_option(p)
    p.add_argument(
        "-n",
        "--lines",
        dest="lines",
        type=non_negative_int(0),
        default=50,
        help="Show this many earlier lines (default 50).",
    )
    p.add_argument("-f", "--follow", action="store_true", help="Keep printing new lines (Ctrl-C ends).")
    p.add_argument(
        "--for", dest="duration", type=positive_float(0.0, 1e9), help="With -f: stop after this many seconds."
    )


def add_parser(sub: Any) -> None:
    p = sub.add_parser("logs", help="Show or follow this machine's dispatcher log for a transport.")
    add_log_options(p)
    p.set_defaults(run="crosstalk.cli.logs_cmd:run")


def run(args: argparse.Namespace) -> int:
    from crosstalk.bus.dispatch.eventlog import follow, tail_lines

    transport = open_transport(args)
    path = transport.state().log
    for line in tail_lines(path, args.lines):
        echo(line)
    if args.follow:
        for line in follow(path, duration=args.duration):
            echo(line)
    return 0
