"""`crosstalk server start|stop|restart|status|logs|unit`: this machine's background dispatcher for a transport."""

from __future__ import annotations

import argparse
import os
from typing import Any

from crosstalk.cli.argtypes import non_negative_int, positive_float
from crosstalk.cli.bus_common import add_transport_option, bus_errors, open_transport
from crosstalk.cli.common import echo, print_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("server", help="Start, stop and watch this machine's background dispatcher for a transport.")
    verbs = p.add_subparsers(dest="server_command", metavar="COMMAND", parser_class=type(p))
    for verb, text in (
        ("start", "Start the dispatcher in the background."),
        ("restart", "Stop the dispatcher (if running) and start it again."),
    ):
        v = verbs.add_parser(verb, help=text)
        add_transport_option(v)
        v.add_argument("--interval", type=positive_float(0.05, 86400), help="Seconds between idle ticks (default 5).")
        v.add_argument("--jobs", type=non_negative_int(1), help="Model runs at once (default 4).")
        v.add_argument(
            "--model-timeout",
            dest="model_timeout",
            type=positive_float(0.1, 86400),
            help="Seconds per model run, overriding the registry.",
        )
        v.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
        v.set_defaults(run=f"crosstalk.cli.server_cmd:run_{verb}")
    stop = verbs.add_parser("stop", help="Stop the dispatcher (SIGTERM, then SIGKILL after 15 s).")
    add_transport_option(stop)
    stop.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    stop.set_defaults(run="crosstalk.cli.server_cmd:run_stop")
    st = verbs.add_parser("status", help="Whether the dispatcher runs, and its heartbeat.")
    add_transport_option(st)
    st.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    st.set_defaults(run="crosstalk.cli.server_cmd:run_status")
    from crosstalk.cli.logs_cmd import add_log_options

    logs = verbs.add_parser("logs", help="Show or follow the dispatcher log.")
    add_log_options(logs)
    logs.set_defaults(run="crosstalk.cli.logs_cmd:run")
    unit = verbs.add_parser("unit", help="Print a systemd user unit running the dispatcher (or --install it).")
    add_transport_option(unit)
    unit.add_argument(
        "--install",
        action="store_true",
        help="Write it to ~/.config/systemd/user/ (then: systemctl --user enable --now UNIT).",
    )
    unit.set_defaults(run="crosstalk.cli.server_cmd:run_unit")


def _start(args: argparse.Namespace, transport: Any) -> int:
    from crosstalk.bus.dispatch import server

    with bus_errors():
        pid, started = server.start(transport, interval=args.interval, jobs=args.jobs, model_timeout=args.model_timeout)
    if args.as_json:
        print_json({"transport": transport.name, "pid": pid, "started": started})
    elif started:
        echo(f"dispatcher for {transport.name} started (pid {pid})")
    else:
        echo(f"dispatcher for {transport.name} already running (pid {pid})")
    return 0


def run_start(args: argparse.Namespace) -> int:
    return _start(args, open_transport(args))


def run_restart(args: argparse.Namespace) -> int:
    from crosstalk.bus.dispatch import server

    transport = open_transport(args)
    with bus_errors():
        server.stop(transport)
    return _start(args, transport)


def run_stop(args: argparse.Namespace) -> int:
    from crosstalk.bus.dispatch import server

    transport = open_transport(args)
    with bus_errors():
        pid = server.stop(transport)
    if args.as_json:
        print_json({"transport": transport.name, "stopped": pid})
    elif pid is None:
        echo(f"no dispatcher running for {transport.name}")
    else:
        echo(f"dispatcher for {transport.name} stopped (pid {pid})")
    return 0


def run_status(args: argparse.Namespace) -> int:
    from crosstalk.bus.dispatch import server

    transport = open_transport(args)
    st = server.status(transport)
    if args.as_json:
        print_json(st.to_json())
        return 0
    beat = st.heartbeat or {}
    if st.running:
        echo(f"dispatcher for {transport.name}: running (pid {st.pid})")
    else:
        echo(f"dispatcher for {transport.name}: not running")
    if beat:
        age = "?" if st.heartbeat_age_s is None else f"{st.heartbeat_age_s:.1f}s ago"
        echo(f"  heartbeat: {age} (ticks {beat.get('ticks')}, alias {beat.get('alias')})")
        claimed = beat.get("claimed")
        echo(f"  claimed:   {', '.join(map(str, claimed if isinstance(claimed, list) else [])) or '-'}")
        echo(
            f"  counts:    dispatched {beat.get('dispatched')}, silent {beat.get('silent')}, "
            f"failed {beat.get('failed')}, errors {beat.get('errors')}"
        )
        if beat.get("halted"):
            echo(f"  halted:    {beat['halted']}")
    echo(f"  log:       {st.log}")
    return 0


def run_unit(args: argparse.Namespace) -> int:
    from crosstalk.bus.dispatch import server

    transport = open_transport(args)
    if not args.install:
        echo(server.unit_text(transport, os.environ).rstrip("\n"))
        return 0
    path = server.install_unit(transport, os.environ)
    echo(str(path))
    unit = server.unit_name(transport)
    echo(f"enable it with: systemctl --user daemon-reload && systemctl --user enable --now {unit}", err=True)
    return 0
