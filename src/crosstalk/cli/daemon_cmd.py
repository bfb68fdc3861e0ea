"""`crosstalk daemon dispatch`: the dispatcher loop in the foreground (what `server start` and systemd run)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from crosstalk.cli.argtypes import non_negative_int, positive_float
from crosstalk.cli.bus_common import add_transport_option, bus_errors, open_transport
from crosstalk.cli.settings_cmd import DEFAULT_INTERVAL_S, DEFAULT_JOBS  # what `settings show` reports

ACTIVE_INTERVAL_S, ACTIVE_FOR_S = 0.5, 120.0  # crosstalk.bus.dispatch.dispatcher's (not imported: --help stays light)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("daemon", help="The dispatcher itself (run by 'server start' or systemd).")
    verbs = p.add_subparsers(dest="daemon_command", metavar="COMMAND", parser_class=type(p))
    d = verbs.add_parser(
        "dispatch",
        help="Run this machine's dispatcher for a transport in the foreground (SIGTERM stops it).",
        description="Tick: pull, scan the commits since the cursor, run the models the new messages wake, commit "
        "and push their replies; then wait for a wake-up ('message send') or the interval. Logs go to stderr and "
        "to the transport's dispatcher.log.",
    )
    add_transport_option(d)
    d.add_argument("--once", action="store_true", help="Run one tick and exit.")
    d.add_argument(
        "--interval",
        type=positive_float(0.05, 86400),
        default=DEFAULT_INTERVAL_S,
        help=f"Seconds between ticks when nothing wakes the dispatcher (default {DEFAULT_INTERVAL_S:g}).",
    )
    d.add_argument(
        "--active-interval",
        dest="active_interval",
        type=positive_float(0.05, 86400),
        default=ACTIVE_INTERVAL_S,
        help=f"Seconds between ticks for {ACTIVE_FOR_S:g} s after traffic (default {ACTIVE_INTERVAL_S:g}; "
        "never longer than --interval).",
    )
    d.add_argument(
        "--active-for",
        dest="active_for",
        type=positive_float(0.0, 86400),
        default=ACTIVE_FOR_S,
        help=f"Seconds after traffic that count as active (default {ACTIVE_FOR_S:g}).",
    )
    d.add_argument(
        "--jobs", type=non_negative_int(1), default=DEFAULT_JOBS, help=f"Model runs at once (default {DEFAULT_JOBS})."
    )
    d.add_argument(
        "--model-timeout",
        dest="model_timeout",
        type=positive_float(0.1, 86400),
        help="Seconds per model run, overriding the registry's timeouts (default: the provider's, 600).",
    )
    d.set_defaults(run="crosstalk.cli.daemon_cmd:run_dispatch")


def run_dispatch(args: argparse.Namespace) -> int:
    from crosstalk.bus.dispatch.dispatcher import Dispatcher
    from crosstalk.bus.dispatch.eventlog import EventLog, same_file

    transport = open_transport(args)
    with bus_errors():
        state = transport.state().ensure()
        # Under `server start` stderr already is the log file: writing both would double every line. Those
        # descriptors follow the log into its new file when it rotates.
        stream = None if same_file(sys.stderr, state.log) else sys.stderr
        log_fds = [fd for fd, std in ((1, sys.stdout), (2, sys.stderr)) if same_file(std, state.log)]
        dispatcher = Dispatcher(
            transport,
            jobs=args.jobs,
            interval=args.interval,
            active_interval=args.active_interval,
            active_for=args.active_for,
            model_timeout=args.model_timeout,
            log=EventLog(state.log, stream=stream, follow_fds=log_fds),
        )
        if not args.once:  # a state root that joins a relay wakes, and is woken by, the transport's other machines
            from crosstalk.relay.wake_follow import FollowedWake

            dispatcher.remote_wake = FollowedWake(transport, dispatcher.paths, dispatcher.log)

        def on_signal(signum: int, _frame: object) -> None:
            dispatcher.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGHUP, on_signal)
        try:
            return dispatcher.run_forever(once=args.once)
        finally:
            if dispatcher.remote_wake is not None:
                dispatcher.remote_wake.close()
