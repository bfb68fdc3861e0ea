"""`crosstalk list` and `crosstalk who NAME`."""

from __future__ import annotations

from typing import Any

from crosstalk.cli.common import echo, fail, print_json, state_paths
from crosstalk.core.errors import ErrorKind

_COLUMNS = ("name", "agent_id", "harness", "role", "owner", "pid", "reachable", "cwd")
_START_KEYS = ("started_at", "harness_started_at")  # kernel start ticks in the descriptor; shown as UTC times


def boot_time() -> float | None:
    """When this machine booted (seconds since the epoch, from /proc/stat's btime), or None."""
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def ticks_to_utc(ticks: object, booted: float | None) -> object:
    """A process start time in clock ticks since boot as ISO-8601 UTC (`2026-12-02T06:42:20Z`); anything that is
    not a tick count is returned unchanged."""
    import os
    from datetime import UTC, datetime

    if booted is None or not isinstance(ticks, str) or not ticks.isdigit():
        return ticks
    seconds = booted + int(ticks) / os.sysconf("SC_CLK_TCK")
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def shown(data: dict[str, object]) -> dict[str, object]:
    """A descriptor as a person reads it: its start times in UTC (the pid-reuse check keeps using the raw ticks,
    which stay in the descriptor file)."""
    booted = boot_time()
    return {k: ticks_to_utc(v, booted) if k in _START_KEYS else v for k, v in data.items()}


def run_list(args: Any) -> int:
    """List the live crosstalk agents on this machine, then the sessions their harnesses know without crosstalk."""
    as_json, include_stale = args.as_json, args.include_stale
    import os

    from crosstalk import harness as kinds
    from crosstalk.registry.discovery import is_live, list_descriptors, recorded_endpoints

    paths = state_paths()
    descs = list_descriptors(paths, include_stale=include_stale)
    names = {d.agent_id: d.name for d in descs}
    known = {(d.harness, d.session_ref) for d in descs}
    rows = []
    for d in descs:
        row = shown(d.to_dict())
        row["live"] = is_live(paths, d) if include_stale else True
        row["owner_name"] = names.get(d.owner) if d.owner else None
        row["crosstalk"] = True
        row["reachable"] = d.reachable()
        rows.append(row)
    bound = recorded_endpoints(d for d, r in zip(descs, rows, strict=True) if r["live"])
    for s in kinds.discover(os.environ, bound):
        if (s.harness, s.session_ref) not in known:
            rows.append(_native_row(s))
    if include_stale:  # --all: every joined machine's agents too, as NAME@ALIAS (relay/presence.py)
        from crosstalk.relay.presence import remote_rows

        rows += [{**r, "crosstalk": True, "live": True} for r in remote_rows(paths)]
    if as_json:
        print_json(rows)
        return 0
    if not rows:
        echo(f"no live agents under {paths.root}")
        return 0
    from crosstalk.core.display import NAME_CHARS, TEXT_CHARS, for_display

    table = [[for_display(_cell(r, c), NAME_CHARS if c == "name" else TEXT_CHARS) for c in _COLUMNS] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(_COLUMNS)]
    echo("  ".join(c.upper().ljust(w) for c, w in zip(_COLUMNS, widths, strict=True)).rstrip())
    for t, r in zip(table, rows, strict=True):
        line = "  ".join(v.ljust(w) for v, w in zip(t, widths, strict=True)).rstrip()
        echo(line + ("" if r["live"] else "  (stale)") + ("" if r["crosstalk"] else "  (no crosstalk)"))
    return 0


def _native_row(s: Any) -> dict[str, object]:
    """A session without crosstalk, as its harness kind discovered it."""
    from crosstalk.core.display import TEXT_CHARS, for_display

    return {
        "name": for_display(s.name),  # a harness record's, not a validated agent name: shown safe
        "harness": s.harness,
        "session_ref": for_display(s.session_ref, TEXT_CHARS),
        "cwd": None if s.cwd is None else for_display(s.cwd, TEXT_CHARS),
        "status": s.status,
        "pid": s.pid,
        "crosstalk": False,
        "reachable": s.reachable,
        "reason": None if s.reason is None else for_display(s.reason, TEXT_CHARS),
        "live": True,
    }


def _cell(row: dict[str, object], column: str) -> object:
    if column == "owner":
        return row.get("owner_name") or row.get("owner") or "-"
    if column == "reachable":
        return "yes" if row["reachable"] else "no"
    value = row.get(column)
    return "-" if value is None else value


def run_who(args: Any) -> int:
    """Resolve TARGET (a name or agent_id) to its live agent and show where it listens."""
    target, as_json = args.target, args.as_json
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.errors import RegistryError

    try:
        desc = resolve(state_paths(), target)
    except RegistryError as exc:
        fail(str(exc), ErrorKind.NO_AGENT)
    data = shown(desc.to_dict())
    if as_json:
        print_json(data)
        return 0
    from crosstalk.core.display import TEXT_CHARS, for_display

    width = max(len(k) for k in data)
    for key, value in data.items():
        echo(f"{key.ljust(width)}  {'-' if value is None else for_display(value, TEXT_CHARS)}")
    return 0
