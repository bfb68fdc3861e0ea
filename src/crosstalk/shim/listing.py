"""The rows list_agents answers with: every crosstalk agent on this machine (its descriptor) and every session the
harness kinds discover without crosstalk, then every other joined machine's agents as NAME@ALIAS (relay presence:
name, harness and reachability only, so the answer stays small). Reachability is what each agent's harness binding
published (Descriptor.reachable), never a list of harnesses kept here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crosstalk import harness as kinds
from crosstalk.core.display import TEXT_CHARS, for_display
from crosstalk.registry.discovery import list_descriptors, recorded_endpoints
from crosstalk.registry.paths import StatePaths


def agent_rows(paths: StatePaths, environ: Mapping[str, str], me: str | None) -> list[dict[str, Any]]:
    descs = list_descriptors(paths)
    sessions = {(s.harness, s.session_ref): s for s in kinds.discover(environ, recorded_endpoints(descs))}
    names = {d.agent_id: d.name for d in descs}
    rows = []
    for d in descs:
        seen = sessions.pop((d.harness, d.session_ref), None)
        row: dict[str, Any] = {
            "name": d.name,
            "agent_id": d.agent_id,
            "harness": d.harness,
            "cwd": d.cwd,
            "status": seen.status if seen is not None else "live",
            "crosstalk": True,
            "reachable": d.reachable(),
            "role": d.role,
            "owner": names.get(d.owner, d.owner) if d.owner else None,
        }
        if not row["reachable"]:
            row["reason"] = d.unreachable_reason()
        if d.agent_id == me:
            row["self"] = True
        rows.append(row)
    for s in sessions.values():
        native: dict[str, Any] = {
            "name": for_display(s.name),  # a harness record's, not a validated agent name: shown safe
            "harness": s.harness,
            "cwd": None if s.cwd is None else for_display(s.cwd, TEXT_CHARS),
            "status": s.status,
            "crosstalk": False,
            "reachable": s.reachable,
        }
        if not s.reachable and s.reason:
            native["reason"] = for_display(s.reason, TEXT_CHARS)
        rows.append(native)
    from crosstalk.relay.presence import remote_rows  # one stat when this machine joined no relay

    rows += [{k: v for k, v in r.items() if k != "machine"} for r in remote_rows(paths)]
    return rows
