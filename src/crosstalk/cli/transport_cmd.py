"""`crosstalk transport init|clone|list|rm`: create, join, list and forget git transports on this machine."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from crosstalk.cli.bus_common import bus_errors, confirm_typed
from crosstalk.cli.common import echo, print_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("transport", help="Create, join, list and remove git transports (the bus).")
    verbs = p.add_subparsers(dest="transport_command", metavar="COMMAND", parser_class=type(p))

    init = verbs.add_parser("init", help="Create a new transport (a git repository) and register it here.")
    init.add_argument("name", metavar="NAME", help="The transport's name on this machine (a-z, 0-9, . _ -).")
    init.add_argument("--dir", dest="directory", metavar="DIR", help="Where to create it (default: ./NAME).")
    init.add_argument("--remote", metavar="URL", help="A git remote (e.g. an empty bare repo) to push it to.")
    init.add_argument("--alias", metavar="ALIAS", help="This machine's name on the bus (default: the transport name).")
    init.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    init.set_defaults(run="crosstalk.cli.transport_cmd:run_init")

    clone = verbs.add_parser("clone", help="Join an existing transport from its git remote.")
    clone.add_argument("url", metavar="URL")
    clone.add_argument("--dir", dest="directory", metavar="DIR", help="Where to clone it (default: from the URL).")
    clone.add_argument("--name", metavar="NAME", help="The name to register it under (default: the directory name).")
    clone.add_argument("--alias", metavar="ALIAS", help="This machine's name on the bus (default: the transport name).")
    clone.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    clone.set_defaults(run="crosstalk.cli.transport_cmd:run_clone")

    ls = verbs.add_parser("list", help="List the transports registered on this machine.")
    ls.add_argument("--json", dest="as_json", action="store_true", help="Print a JSON array.")
    ls.set_defaults(run="crosstalk.cli.transport_cmd:run_list")

    rm = verbs.add_parser("rm", help="Forget a transport on this machine (its files stay unless --delete-files).")
    rm.add_argument("name", metavar="NAME")
    rm.add_argument("--delete-files", action="store_true", help="Also delete its directory (asks for the name).")
    rm.add_argument("--yes", metavar="NAME", help="Confirm --delete-files without a prompt by repeating the name.")
    rm.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    rm.set_defaults(run="crosstalk.cli.transport_cmd:run_rm")


def run_init(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.transports import init_transport

    with bus_errors():
        result = init_transport(
            args.name,
            Path(args.directory) if args.directory else None,
            args.remote,
            args.alias,
            cwd=Path.cwd(),
            environ=os.environ,
        )
    t = result.transport
    if args.as_json:
        print_json({"name": t.name, "root": str(t.root), "alias": t.alias, "pushed": result.pushed})
    else:
        echo(str(t.root))
    return 0


def run_clone(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.transports import clone_transport

    with bus_errors():
        t = clone_transport(
            args.url,
            Path(args.directory) if args.directory else None,
            args.name,
            args.alias,
            cwd=Path.cwd(),
            environ=os.environ,
        )
    if args.as_json:
        print_json({"name": t.name, "root": str(t.root), "alias": t.alias})
    else:
        echo(str(t.root))
    return 0


def run_list(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.transports import list_transports

    with bus_errors():
        infos = list_transports(os.environ)
    if args.as_json:
        print_json([i.to_json() for i in infos])
        return 0
    if not infos:
        echo("no transports registered (crosstalk transport init NAME, or transport clone URL)")
        return 0
    width = max(len(i.name) for i in infos)
    for i in infos:
        status = "ok" if i.version_ok else f"PROBLEM: {i.problem}"
        alias = f" alias={i.alias}" if i.alias else ""
        echo(f"{i.name:<{width}}  {i.root}{alias}  {status}")
    return 0


def run_rm(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.transports import check_not_running, get_entry, remove_transport, validate_name

    with bus_errors():
        entry = get_entry(validate_name(args.name), os.environ)
        if args.delete_files and entry is not None:
            check_not_running(args.name, os.environ)  # before asking, not after the user typed the name
            confirm_typed("transport", args.name, args.yes)
        removed = remove_transport(args.name, delete_files=args.delete_files, environ=os.environ)
    if args.as_json:
        print_json({"name": removed.name, "root": str(removed.root), "deleted_files": bool(args.delete_files)})
    elif args.delete_files:
        echo(f"removed transport {removed.name} and deleted {removed.root}")
    else:
        echo(f"removed transport {removed.name} from this machine (files kept at {removed.root})")
    return 0
