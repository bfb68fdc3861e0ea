"""`crosstalk status [--json]`: a transport at a glance — where it is, its channels, this machine's dispatcher.

Cheap by design: channel names come from CHANNEL.md files and the dispatcher numbers from its heartbeat; nothing
here walks the messages (that would grow with the history)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from crosstalk.cli.bus_common import add_transport_option, bus_errors, open_transport
from crosstalk.cli.common import echo, print_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "status", help="A transport at a glance: channels, dispatcher heartbeat, claimed models, errors."
    )
    add_transport_option(p)
    p.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    p.set_defaults(run="crosstalk.cli.status_cmd:run")


def collect(transport: Any) -> dict[str, Any]:
    from crosstalk.bus.dispatch import server
    from crosstalk.bus.errors import BusError
    from crosstalk.bus.protocol import layout
    from crosstalk.bus.transport.channels import list_channels
    from crosstalk.bus.transport.state import read_cursor

    repo = transport.git()
    remote = repo.run("config", "--get", "remote.origin.url", check=False).strip() or None
    try:
        head: str | None = repo.head()
    except BusError:
        head = None
    st = server.status(transport, os.environ)
    beat = st.heartbeat or {}
    cursor = read_cursor(transport.state())
    claimed, skipped = beat.get("claimed"), beat.get("skipped")
    if claimed is None:  # no dispatcher has run here yet: say what one would claim
        from crosstalk.bus.protocol.models import claim, load_registry

        try:
            specs, skips = claim(load_registry(transport.root), os.environ.get("PATH"))
            claimed, skipped = [s.key for s in specs], [{"what": s.what, "reason": s.reason} for s in skips]
        except BusError as exc:
            claimed, skipped = [], [{"what": "data/crosstalk.yaml", "reason": exc.message}]
    return {
        "transport": transport.name,
        "root": str(transport.root),
        "alias": transport.alias,
        "protocol": layout.PROTOCOL_VERSION,
        "remote": remote,
        "head": head,
        "channels": [{"name": c.name, "uuid": c.uuid, "parent": c.parent} for c in list_channels(transport.root)],
        "dispatcher": {
            "running": st.running,
            "pid": st.pid,
            "heartbeat_age_s": None if st.heartbeat_age_s is None else round(st.heartbeat_age_s, 3),
            "last_tick_at": beat.get("last_tick_at"),
            "claimed": claimed,
            "skipped": skipped,
            "errors": beat.get("errors", 0),
            "dispatched": beat.get("dispatched", 0),
            "failed": beat.get("failed", 0),
            "silent": beat.get("silent", 0),
            "halted": beat.get("halted"),
            "cursor": cursor,
            "caught_up": cursor is not None and cursor == head,
        },
    }


def run(args: argparse.Namespace) -> int:
    transport = open_transport(args)
    with bus_errors():  # git missing or timing out: one line, not a traceback
        data = collect(transport)
    if args.as_json:
        print_json(data)
        return 0
    d = data["dispatcher"]
    echo(f"transport {data['transport']} (protocol v{data['protocol']}) at {data['root']}")
    echo(f"  alias:    {data['alias']}")
    echo(f"  remote:   {data['remote'] or '-'}")
    echo(f"  channels: {len(data['channels'])}")
    for ch in data["channels"]:
        echo(f"    {ch['name']}  {ch['uuid']}")
    if d["running"]:
        age = "?" if d["heartbeat_age_s"] is None else f"{d['heartbeat_age_s']:.1f}s ago"
        echo(f"  dispatcher: running (pid {d['pid']}), heartbeat {age}")
    else:
        echo("  dispatcher: not running (start it with 'crosstalk server start')")
    echo(f"  claimed:  {', '.join(d['claimed']) or '-'}")
    for s in d["skipped"]:
        echo(f"    skipped {s.get('what')}: {s.get('reason')}")
    echo(f"  errors:   {d['errors']}   dispatched {d['dispatched']}, failed {d['failed']}, silent {d['silent']}")
    if d["halted"]:
        echo(f"  halted:   {d['halted']}")
    cursor = (d["cursor"] or "-")[:12]
    echo(f"  cursor:   {cursor} (HEAD {(data['head'] or '-')[:12]}{', caught up' if d['caught_up'] else ''})")
    return 0
