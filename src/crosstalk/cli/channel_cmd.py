"""`crosstalk channel create|list|rename|delete`: the conversations of a transport."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crosstalk.cli.bus_common import add_transport_option, bus_errors, confirm_typed, open_transport
from crosstalk.cli.common import echo, print_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("channel", help="Create, list, rename and delete channels in a transport.")
    verbs = p.add_subparsers(dest="channel_command", metavar="COMMAND", parser_class=type(p))

    create = verbs.add_parser("create", help="Create a channel; prints its UUID.")
    create.add_argument("name", metavar="NAME", help="1-64 characters, no '/', unique in the transport.")
    create.add_argument("--parent", metavar="HANDLE", help="Make it a sub-channel of this channel (name or UUID).")
    create.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    add_transport_option(create)
    create.set_defaults(run="crosstalk.cli.channel_cmd:run_create")

    ls = verbs.add_parser("list", help="List the channels with their UUIDs.")
    ls.add_argument("--json", dest="as_json", action="store_true", help="Print a JSON array.")
    add_transport_option(ls)
    ls.set_defaults(run="crosstalk.cli.channel_cmd:run_list")

    rename = verbs.add_parser("rename", help="Rename a channel (HANDLE = its name or UUID).")
    rename.add_argument("handle", metavar="HANDLE")
    rename.add_argument("new_name", metavar="NEW")
    rename.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    add_transport_option(rename)
    rename.set_defaults(run="crosstalk.cli.channel_cmd:run_rename")

    delete = verbs.add_parser(
        "delete", help="Delete a channel and its messages (asks you to type its name; --yes NAME for scripts)."
    )
    delete.add_argument("handle", metavar="HANDLE")
    delete.add_argument("--yes", metavar="NAME", help="Confirm without a prompt by repeating the channel's name.")
    delete.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    add_transport_option(delete)
    delete.set_defaults(run="crosstalk.cli.channel_cmd:run_delete")


def _warn_push(result: Any) -> None:
    if result.push_error:
        sys.stderr.write(
            f"crosstalk: warning: committed locally but the push failed ({result.push_error}); "
            "it is pushed with the next change or by the dispatcher\n"
        )


def run_create(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.channels import create_channel

    transport = open_transport(args)
    with bus_errors():
        channel, result = create_channel(transport, args.name, args.parent)
    _warn_push(result)
    if args.as_json:
        print_json(channel.to_json())
    else:
        echo(channel.uuid)
    return 0


def run_list(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.channels import list_channels

    transport = open_transport(args)
    with bus_errors():
        channels = list_channels(transport.root)
    if args.as_json:
        print_json([c.to_json() for c in channels])
        return 0
    if not channels:
        echo("no channels yet (crosstalk channel create NAME)")
        return 0
    by_uuid = {c.uuid: c.name for c in channels}
    for c in channels:
        parent = f"  (parent: {by_uuid.get(c.parent, c.parent)})" if c.parent else ""
        echo(f"{c.uuid}  {c.name}{parent}")
    return 0


def run_rename(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.channels import rename_channel

    transport = open_transport(args)
    with bus_errors():
        channel, result = rename_channel(transport, args.handle, args.new_name)
    _warn_push(result)
    if args.as_json:
        print_json(channel.to_json())
    else:
        echo(f"{channel.uuid}  {channel.name}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.channels import delete_channel, find_channel

    transport = open_transport(args)
    with bus_errors():
        channel = find_channel(transport.root, args.handle)
        confirm_typed("channel", channel.name, args.yes)
        deleted, result = delete_channel(transport, channel.uuid)
    _warn_push(result)
    if args.as_json:
        print_json(deleted.to_json())
    else:
        echo(f"deleted channel {deleted.name} ({deleted.uuid})")
    return 0
