"""`crosstalk settings show [--json]`: the effective bus settings on this machine, and where each comes from."""

from __future__ import annotations

import argparse
import os
from typing import Any

from crosstalk.cli.bus_common import add_transport_option, bus_errors, open_transport
from crosstalk.cli.common import echo, print_json

DEFAULT_INTERVAL_S = 5.0
DEFAULT_JOBS = 4


def add_parser(sub: Any) -> None:
    p = sub.add_parser("settings", help="Show the effective bus settings on this machine.")
    verbs = p.add_subparsers(dest="settings_command", metavar="COMMAND", parser_class=type(p))
    show = verbs.add_parser("show", help="State root, transport, alias (and its source), dispatcher defaults.")
    add_transport_option(show)
    show.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    show.set_defaults(run="crosstalk.cli.settings_cmd:run_show")


def _alias_source(transport: Any) -> str:
    from crosstalk.bus.transport.transports import get_entry

    if os.environ.get("CROSSTALK_ALIAS"):
        return "CROSSTALK_ALIAS"
    entry = get_entry(transport.name) if transport.registered else None
    if entry is not None and entry.alias:
        return "registry (--alias at init/clone)"
    return "transport name"


def collect(transport: Any) -> dict[str, Any]:
    from crosstalk.bus.errors import BusError
    from crosstalk.bus.protocol.models import CONFIG_PATH, DEFAULT_TIMEOUT_S, claim, load_registry
    from crosstalk.bus.transport.state import bus_root, dispatcher_pid, read_json

    try:
        claimed, skipped = claim(load_registry(transport.root), os.environ.get("PATH"))
        registry_error = None
    except BusError as exc:
        claimed, skipped, registry_error = [], [], exc.message
    beat_settings: dict[str, Any] = {}
    beat = read_json(transport.state().heartbeat)
    if isinstance(beat, dict) and dispatcher_pid(transport.state()) is not None:
        beat_settings = {"interval": beat.get("interval"), "jobs": beat.get("jobs")}
    return {
        "state_root": str(bus_root()),
        "state_dir": str(transport.state().dir),
        "transport": transport.name,
        "root": str(transport.root),
        "registered": transport.registered,
        "transport_source": "CROSSTALK_TRANSPORT" if os.environ.get("CROSSTALK_TRANSPORT") else "resolution",
        "alias": transport.alias,
        "alias_source": _alias_source(transport),
        "interval_default_s": DEFAULT_INTERVAL_S,
        "jobs_default": DEFAULT_JOBS,
        "model_timeout_default_s": DEFAULT_TIMEOUT_S,
        "running_dispatcher": beat_settings or None,
        "registry": str(transport.root / CONFIG_PATH),
        "registry_error": registry_error,
        "claimed_models": len(claimed),
        "skipped": len(skipped),
    }


def run_show(args: argparse.Namespace) -> int:
    transport = open_transport(args)
    with bus_errors():
        data = collect(transport)
    if args.as_json:
        print_json(data)
        return 0
    echo(f"state root:     {data['state_root']}")
    echo(f"transport:      {data['transport']} ({data['root']})")
    echo(f"alias:          {data['alias']} (from {data['alias_source']})")
    echo(f"interval:       {data['interval_default_s']:g} s (default)")
    echo(f"jobs:           {data['jobs_default']} (default)")
    echo(f"model timeout:  {data['model_timeout_default_s']:g} s (default; a provider's timeout: overrides it)")
    if data["running_dispatcher"]:
        rd = data["running_dispatcher"]
        echo(f"running:        interval {rd.get('interval')} s, jobs {rd.get('jobs')}")
    problem = f" (error: {data['registry_error']})" if data["registry_error"] else ""
    echo(f"registry:       {data['registry']}{problem}")
    echo(f"claimed models: {data['claimed_models']} by PATH ({data['skipped']} skipped)")
    return 0
