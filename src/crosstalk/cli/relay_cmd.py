"""`crosstalk relay join URL [--alias NAME] [--creds FILE] | status | leave | serve`: this state root's place on a
NATS relay (docs/relay.md; the design: docs/dev/relay.md). Nothing here listens on a port: the relay process only
dials out to NATS."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from crosstalk.cli.common import echo, fail, print_json, state_paths
from crosstalk.core.errors import EXIT_OK, ErrorKind

HELP = "Join this machine to a NATS relay, see its state, leave it, or run its relay process."


def add_parser(sub: Any) -> None:
    p = sub.add_parser("relay", help=HELP, description=HELP)
    verbs = p.add_subparsers(dest="relay_command", metavar="COMMAND", parser_class=type(p))
    join = verbs.add_parser(
        "join",
        help="Check this machine can serve and send as ALIAS on the relay at URL, and save it for this state root.",
    )
    join.add_argument("url", metavar="URL", help="nats://127.0.0.1:4222 on loopback; tls://HOST:PORT elsewhere.")
    join.add_argument("--alias", help="This machine's name on the relay (default $CROSSTALK_ALIAS, else the host).")
    join.add_argument(
        "--creds",
        metavar="FILE",
        help="This machine's credentials, mode 0600: a NATS .creds file, an nkey seed, or user=/password= or token= "
        "lines.",
    )
    join.add_argument(
        "--no-start",
        dest="start",
        action="store_false",
        help="Save the join without starting the relay process (run `crosstalk relay serve` yourself, e.g. under "
        "systemd).",
    )
    join.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    join.set_defaults(run="crosstalk.cli.relay_cmd:run_join")
    status = verbs.add_parser("status", help="Whether this state root joined a relay, and its relay process's state.")
    status.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    status.set_defaults(run="crosstalk.cli.relay_cmd:run_status")
    leave = verbs.add_parser("leave", help="Stop this state root's relay process and forget the relay.")
    leave.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    leave.set_defaults(run="crosstalk.cli.relay_cmd:run_leave")
    serve = verbs.add_parser(
        "serve",
        help="Run this machine's relay process in the foreground: messages to NAME@ALIAS from other machines reach "
        "the live agents here (run it under systemd, tmux or &).",
    )
    serve.set_defaults(run="crosstalk.cli.relay_cmd:run_serve")


def _config_errors() -> Any:
    from crosstalk.relay.config import RelayConfigError

    return RelayConfigError


def run_join(args: argparse.Namespace) -> int:
    from crosstalk.relay.config import RelayConfig, check_alias, check_url, default_alias, load, read_credentials, save
    from crosstalk.relay.join import check_join

    paths = state_paths()
    try:
        url = check_url(args.url)
        alias = check_alias(args.alias if args.alias is not None else default_alias())
        creds = os.path.abspath(args.creds) if args.creds else None
        if creds is not None:
            read_credentials(creds)
        before = load(paths)
    except _config_errors() as exc:
        fail(str(exc), ErrorKind.USAGE)
    if before is not None and (before.url, before.alias) != (url, alias):
        fail(
            f"this state root already joined {before.url} as {before.alias!r}; run `crosstalk relay leave` first",
            ErrorKind.USAGE,
        )
    config = RelayConfig(url, alias, creds)
    try:
        check_join(config)
    except _config_errors() as exc:
        fail(str(exc), ErrorKind.FAILED)
    save(paths, config)
    pid, started = None, False
    if args.start:
        from crosstalk.relay import lifecycle

        try:
            pid, started = lifecycle.start(paths)
        except _config_errors() as exc:
            fail(f"joined {url} as {alias!r}, but {exc}", ErrorKind.FAILED)
    if args.as_json:
        print_json({**config.to_dict(), "joined": True, "serve_pid": pid, "started": started})
    elif pid is None:
        echo(f"joined {url} as {alias!r}: agents here are reachable as NAME@{alias} once `crosstalk relay serve` runs")
    else:
        how = "started" if started else "already running"
        echo(f"joined {url} as {alias!r}: relay process {how} (pid {pid}); agents here are reachable as NAME@{alias}")
    return EXIT_OK


def run_status(args: argparse.Namespace) -> int:
    from crosstalk.relay.config import load
    from crosstalk.relay.serve import read_status

    paths = state_paths()
    try:
        config = load(paths)
    except _config_errors() as exc:
        fail(str(exc), ErrorKind.FAILED)
    serving = read_status(paths)
    out: dict[str, Any] = {"joined": config is not None, **(config.to_dict() if config else {})}
    if serving is not None:
        out["serve"] = {k: serving.get(k) for k in ("pid", "state", "since", "error", "answered")}
        from crosstalk.relay.presence import read_presence

        out["machines"] = {alias: len(agents) for alias, agents in sorted(read_presence(paths).items())}
    else:
        out["serve"] = None
    if args.as_json:
        print_json(out)
        return EXIT_OK
    if config is None:
        echo("not joined to a relay (crosstalk relay join URL --alias NAME --creds FILE)")
        return EXIT_OK
    echo(f"joined {config.url} as {config.alias!r}" + (f" (credentials {config.creds})" if config.creds else ""))
    if serving is None:
        echo("relay process: not running (crosstalk relay serve)")
    else:
        since = max(0.0, time.time() - float(serving.get("since") or time.time()))
        line = f"relay process: pid {serving.get('pid')}, {serving.get('state')} for {since:.0f} s"
        line += f", {serving.get('answered', 0)} answered"
        echo(line + (f"; last error: {serving['error']}" if serving.get("error") else ""))
        heard = ", ".join(f"{alias} ({n} agent{'' if n == 1 else 's'})" for alias, n in out["machines"].items())
        echo(f"other machines: {heard or 'none heard yet'}")
    return EXIT_OK


def run_leave(args: argparse.Namespace) -> int:
    from crosstalk.relay.config import load, remove

    paths = state_paths()
    try:
        config = load(paths)
    except _config_errors():
        config = None  # a damaged file is still removed
    stopped = _stop_serving(paths)
    removed = remove(paths)
    if args.as_json:
        print_json({"left": removed, "url": config.url if config else None, "stopped_pid": stopped})
    elif removed:
        where = config.url if config else "the relay"
        echo(f"left {where}" + (f"; stopped relay process {stopped}" if stopped else ""))
    else:
        echo("not joined to a relay; nothing to leave")
    return EXIT_OK


def _stop_serving(paths: Any) -> int | None:
    from crosstalk.relay import lifecycle

    try:
        return lifecycle.stop(paths)
    except _config_errors() as exc:
        fail(str(exc), ErrorKind.FAILED)


def run_serve(args: argparse.Namespace) -> int:
    import asyncio

    from crosstalk.relay.config import credentials_of, load
    from crosstalk.relay.serve import serve

    paths = state_paths()
    try:
        config = load(paths)
        if config is None:
            fail("this state root joined no relay: run `crosstalk relay join URL` first", ErrorKind.USAGE)
        credentials_of(config)  # refuse a credentials file gone wrong now, not at every reconnect
        asyncio.run(serve(paths, config))
    except _config_errors() as exc:
        fail(str(exc), ErrorKind.FAILED)
    return EXIT_OK
