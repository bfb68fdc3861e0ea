"""`crosstalk version`: the package version and the bus protocol version it speaks."""

from __future__ import annotations

from typing import Any

from crosstalk import __version__
from crosstalk.cli.common import echo, print_json

# The git bus protocol this crosstalk reads and writes (CROSSTALK-VERSION in a transport). Kept here as well as in
# crosstalk.bus.protocol.layout so `crosstalk version` stays an import of nothing heavy; a test keeps the two equal.
PROTOCOL_VERSION = 7


def add_parser(sub: Any) -> None:
    p = sub.add_parser("version", help="Print crosstalk's version and the bus protocol version.")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    p.set_defaults(run="crosstalk.cli.version_cmd:run")


def run(args: Any) -> int:
    if args.as_json:
        print_json({"crosstalk": __version__, "protocol": PROTOCOL_VERSION})
    else:
        echo(f"crosstalk {__version__} (bus protocol v{PROTOCOL_VERSION})")
    return 0
