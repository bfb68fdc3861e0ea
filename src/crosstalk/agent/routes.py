"""Which inbound messages a session may still answer with the reply tool. Pure: no I/O.

The inform route: an inform delivered from a verified agent may be answered for an hour after its delivery.
Delivery outcomes that put it into the session (the model may have read it) open it: unknown counts, since an
adapter cannot always confirm an injection; recovered, bounced, rejected and unreachable open no route.
shim/replying.py enforces the route; `open_inbound` lists it (the bounce notice, receive_message).
"""

from __future__ import annotations

from crosstalk.core.states import State
from crosstalk.journal import JournalState

INFORM_ROUTE_TTL_S = 3600.0
ROUTED_STATES = frozenset({State.ACCEPTED, State.QUEUED, State.UNKNOWN})


def open_inbound(
    state: JournalState, now: float, *, inform_window_s: float = INFORM_ROUTE_TTL_S
) -> list[dict[str, str]]:
    """Inbound messages the session may still answer, newest first: asks whose reply is owed (or that are being
    written into the session right now), and informs from verified agents delivered within the window (their reply
    route)."""
    rows: list[tuple[float, dict[str, str]]] = []
    for mid, entry in state.messages.items():
        if entry.native or (entry.sender or {}).get("class") != "verified":
            continue
        kind = entry.message.get("kind") or "inform"
        delivered = entry.state in ROUTED_STATES
        fresh = entry.outcome_ts is not None and now - entry.outcome_ts < inform_window_s
        # An ask being written into the session counts already: the model may answer before its outcome is in.
        owed = state.reply_owed(mid) or entry.state is State.DISPATCHING
        if (kind == "ask" and owed) or (kind == "inform" and delivered and fresh):
            name = entry.sender.get("name") or entry.sender.get("agent_id") or "?"
            rows.append((entry.ts, {"message_id": mid, "from": str(name), "kind": kind}))
    return [row for _, row in sorted(rows, key=lambda r: r[0], reverse=True)]
