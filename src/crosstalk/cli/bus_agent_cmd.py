"""`crosstalk agent list [--transport T] [--json]`: the transport's models, which this machine claims, and why not."""

from __future__ import annotations

import os
import sys
from typing import Any

from crosstalk.cli.common import Fail, echo, print_json
from crosstalk.core.errors import ErrorKind

_COLUMNS = ("MODEL", "CLAIMED", "COMMAND", "REASON")


def run_list(args: Any) -> int:
    from crosstalk.bus.errors import BusError
    from crosstalk.bus.protocol.models import claim, load_registry
    from crosstalk.cli.bus_common import open_transport

    transport = open_transport(args)
    try:
        registry = load_registry(transport.root)
    except BusError as exc:
        raise Fail(exc.message, ErrorKind.FAILED) from None
    claimed, skipped = claim(registry, os.environ.get("PATH"))
    rows = _rows(registry.models, claimed, skipped)
    for warning in registry.warnings:
        sys.stderr.write(f"crosstalk: warning: {warning.reason}\n")
    if args.as_json:
        print_json(rows)
        return 0
    if not rows:
        echo(f"no models declared in {transport.root / 'data/crosstalk.yaml'}")
        return 0
    table = [[r["model"], "yes" if r["claimed"] else "no", " ".join(r["argv"]) or "-", r["reason"] or ""] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(_COLUMNS)]
    echo("  ".join(c.ljust(w) for c, w in zip(_COLUMNS, widths, strict=True)).rstrip())
    for t in table:
        echo("  ".join(v.ljust(w) for v, w in zip(t, widths, strict=True)).rstrip())
    return 0


def _rows(models: list[Any], claimed: list[Any], skipped: list[Any]) -> list[dict[str, Any]]:
    """One row per declared model (claimed or not), then one per provider or model skipped at load time."""
    claimed_keys = {spec.key for spec in claimed}
    reasons = {s.what: s.reason for s in skipped}
    rows: list[dict[str, Any]] = []
    for spec in models:
        is_claimed = spec.key in claimed_keys
        rows.append(
            {
                "model": spec.key,
                "provider": spec.provider,
                "name": spec.name,
                "claimed": is_claimed,
                "argv": list(spec.argv),
                "reason": None if is_claimed else reasons.get(spec.key, "not claimed"),
            }
        )
    declared = {spec.key for spec in models}
    for s in skipped:
        if s.what in declared:
            continue  # a declared model this machine does not claim: already a row above
        # A skipped model's `what` is "provider/model"; a skipped provider's is its name.
        provider, _, name = s.what.partition("/")
        rows.append(
            {
                "model": s.what if name else f"{provider}/*",  # "/*": the whole provider was skipped
                "provider": provider,
                "name": name or None,
                "claimed": False,
                "argv": [],
                "reason": s.reason,
            }
        )
    return rows
