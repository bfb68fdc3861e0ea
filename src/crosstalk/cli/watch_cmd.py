"""`crosstalk watch`: a live terminal view of every agent on this machine, the traffic and the bus dispatchers.

textual is imported here only when the screen is about to start: no other command pays for it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crosstalk.cli.common import echo, fail, print_json, state_paths
from crosstalk.core.errors import ErrorKind


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "watch",
        help="A live view of every agent here, their traffic, and each bus transport's dispatcher.",
        description="Show every agent on this machine (name, harness, role, owner, reachable or why not, the asks "
        "it owes and waits on, its unread mailbox), each message with its delivery state and latency, and each bus "
        "transport's dispatcher heartbeat and pending work, following changes as they happen. Press q to quit.",
    )
    p.add_argument("--once", action="store_true", help="Print one snapshot and exit (with --json: as JSON).")
    p.add_argument("--json", dest="as_json", action="store_true", help="With --once: print the snapshot as JSON.")
    p.add_argument(
        "--no-inotify",
        dest="no_inotify",
        action="store_true",
        help="Take a snapshot every second instead of following file events.",
    )
    p.set_defaults(run="crosstalk.cli.watch_cmd:run")


def run(args: argparse.Namespace) -> int:
    from crosstalk.watch.snapshot import Reader

    if args.as_json and not args.once:
        fail("--json prints one snapshot: add --once", ErrorKind.USAGE)
    reader = Reader(state_paths())
    if args.once:
        snap = reader.take()
        if args.as_json:
            print_json(snap.to_json())
        else:
            from crosstalk.watch.rows import text_tables

            echo(text_tables(snap))
        return 0
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail("watch needs a terminal; for scripts use 'crosstalk watch --once --json'", ErrorKind.USAGE)
    from crosstalk.watch.app import WatchApp

    code = WatchApp(reader, use_inotify=not args.no_inotify).run()
    return code or 0
