"""The cells watch shows for each record, as text: shared by the textual screen and `crosstalk watch --once`."""

from __future__ import annotations

import time

from crosstalk.core.display import NAME_CHARS, TEXT_CHARS, for_display
from crosstalk.watch.records import AgentView, MessageView, RemoteAgentView, Snapshot, TransportView

AGENT_COLUMNS = ("NAME", "HARNESS", "ROLE", "OWNER", "REACHABLE", "OWES", "WAITING", "UNREAD", "PID")
TRAFFIC_COLUMNS = ("TIME", "FROM", "TO", "KIND", "STATE", "LATENCY", "TEXT")
TRANSPORT_COLUMNS = (
    "TRANSPORT", "DISPATCHER", "HEARTBEAT", "PENDING", "HELD", "DISPATCHED", "FAILED", "ERRORS", "NOTE",
)  # fmt: skip


def _safe(cells: tuple[str, ...], names: tuple[int, ...]) -> tuple[str, ...]:
    """Every cell shown safe (core.display): names capped short, the rest at TEXT_CHARS."""
    return tuple(for_display(c, NAME_CHARS if i in names else TEXT_CHARS) for i, c in enumerate(cells))


def agent_row(a: AgentView) -> tuple[str, ...]:
    owner = a.owner_name or (a.owner[:8] if a.owner else "-")
    reach = "yes" if a.reachable else f"no: {a.reason}"
    cells = (a.name, a.harness, a.role, owner, reach, str(a.open_asks), str(a.asks_waiting), str(a.unread), str(a.pid))
    return _safe(cells, (0, 3))


def remote_agent_row(a: RemoteAgentView) -> tuple[str, ...]:
    """Another machine's agent in the agents table: what its machine announced, the rest not known here."""
    reach = "yes" if a.reachable else f"no: {a.reason or 'unreachable'}"
    return _safe((a.name, a.harness, "-", "-", reach, "-", "-", "-", "-"), (0,))


def agents_title(snap: Snapshot) -> str:
    remote = f", {len(snap.remote_agents)} on other machines" if snap.remote_agents else ""
    return f"{len(snap.agents)} live{remote}"


def agent_rows(snap: Snapshot) -> list[tuple[str, ...]]:
    return [agent_row(a) for a in snap.agents] + [remote_agent_row(a) for a in snap.remote_agents]


def traffic_row(m: MessageView) -> tuple[str, ...]:
    when = time.strftime("%H:%M:%S", time.localtime(m.at))
    sender = m.sender if m.sender_class == "verified" else f"{m.sender} ({m.sender_class})"
    state = f"{m.state} ({m.reason})" if m.reason else m.state
    latency = "-" if m.latency_s is None else format_latency(m.latency_s)
    return _safe((when, sender, m.to, m.kind, state, latency, m.text), (1, 2))


def transport_row(t: TransportView) -> tuple[str, ...]:
    dispatcher = f"running (pid {t.pid})" if t.running and t.pid else ("running" if t.running else "not running")
    beat = "never" if t.heartbeat_age_s is None else f"{format_age(t.heartbeat_age_s)} ago"
    pending = "?" if t.unscanned_commits is None else f"{t.unscanned_commits} commits"
    note = t.problem or (f"halted: {t.halted}" if t.halted else "")
    counts = (str(t.held), str(t.dispatched), str(t.failed), str(t.errors))
    return _safe((t.name, dispatcher, beat, pending, *counts, note), (0,))


def format_latency(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def format_age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m" if seconds < 3600 else f"{seconds / 3600:.1f}h"


def text_tables(snap: Snapshot) -> str:
    """The snapshot as three plain tables (`crosstalk watch --once`)."""
    parts = [f"state root {snap.state_root}"]
    for title, columns, cells in (
        (f"agents ({agents_title(snap)})", AGENT_COLUMNS, agent_rows(snap)),
        (f"transports ({len(snap.transports)})", TRANSPORT_COLUMNS, [transport_row(t) for t in snap.transports]),
        (f"traffic ({len(snap.messages)} messages, newest first)", TRAFFIC_COLUMNS,
         [traffic_row(m) for m in reversed(snap.messages)]),
    ):  # fmt: skip
        parts += ["", title]
        if not cells:
            parts.append("  (none)")
            continue
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
        for row in (columns, *cells):
            parts.append("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(parts)
