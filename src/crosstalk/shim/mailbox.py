"""receive_message: a cursor over the bound agent's whole journal mailbox.

Entries are the inbound messages the journal holds, ordered by their journal position (`seq`); the cursor is the
last seq a page showed. The state filter always applies, the default `unresolved` included, so a page may skip
entries, but the cursor walks every message the agent holds: each one still owed something, and the newest settled
ones (an agent keeps a bounded number of those whole: journal/window.py). `replies` shows the answers to asks this
agent sent: inbound messages whose in_reply_to names one of its journaled `sent` asks.
"""

from __future__ import annotations

from typing import Any

from crosstalk.agent import AgentHost
from crosstalk.journal import MessageEntry
from crosstalk.shim.schemas import PAGE_SIZE

WITHHELD_TEXT = "(withheld: your user has not let this message through)"
NEEDS_ATTENTION = frozenset({"submitted", "dispatching", "unknown", "recovered", "unreachable"})


def reply_owed(host: AgentHost, entry: MessageEntry) -> bool:
    """An ask delivered to this agent whose task is still open (or a relayed ask not replied to): a reply is owed."""
    if entry.message.get("kind") != "ask":
        return False
    task = host.task_holding(entry.message_id)
    if task is None:  # an ask another machine's agent sent across the relay: owed until this agent replied
        from crosstalk.shim.replying import relayed_ask_owed

        return relayed_ask_owed(host, entry)
    return not task.view.terminal


def is_reply_to_my_ask(host: AgentHost, entry: MessageEntry) -> bool:
    """An inbound message whose in_reply_to names an ask this agent sent (journaled `sent` records)."""
    irt = entry.message.get("in_reply_to")
    if not isinstance(irt, str):
        return False
    sent = host.state.sent.get(irt)
    return sent is not None and (sent.get("message") or {}).get("kind") == "ask"


def matches(host: AgentHost, entry: MessageEntry, state_filter: str) -> bool:
    state = entry.state.value
    if state_filter == "all":
        return True
    if state_filter in ("recovered", "bounced"):
        return state == state_filter
    if state_filter == "replies":
        return is_reply_to_my_ask(host, entry)
    # unresolved: what still needs the model's attention
    if entry.resolved or entry.withheld:
        return False
    return state in NEEDS_ATTENTION or reply_owed(host, entry)


def render(host: AgentHost, entry: MessageEntry) -> dict[str, Any]:
    msg, sender = entry.message, entry.sender
    cls = sender.get("class") or "unverified"
    name = sender.get("name") or sender.get("agent_id")
    out: dict[str, Any] = {
        "seq": entry.seq,
        "message_id": entry.message_id,
        "from": name if cls == "verified" else f"{name or 'anonymous'} ({cls})",
        "sender_class": cls,
        "kind": msg.get("kind") or "inform",
        "state": entry.state.value,
        "text": "\n".join(p.get("text", "") for p in msg.get("parts") or [] if isinstance(p, dict)),
        "in_reply_to": msg.get("in_reply_to"),
        "received_at": entry.ts,
    }
    if entry.withheld:  # its user has not let the model read it (held, denied, refused by their settings)
        out["text"] = WITHHELD_TEXT
    if entry.reason:
        out["reason"] = entry.reason
    if msg.get("task_id"):
        out["task_id"] = msg["task_id"]
    if reply_owed(host, entry):
        out["reply_owed"] = True
    return out


def page(host: AgentHost, cursor: int, state_filter: str) -> dict[str, Any]:
    entries = sorted(host.state.messages.values(), key=lambda e: e.seq)
    later = [e for e in entries if e.seq > cursor]
    shown: list[dict[str, Any]] = []
    next_cursor = cursor
    more = False
    for entry in later:
        if not matches(host, entry, state_filter):
            next_cursor = entry.seq
            continue
        if len(shown) == PAGE_SIZE:
            more = True
            break
        shown.append(render(host, entry))
        next_cursor = entry.seq
    out: dict[str, Any] = {"state": "ok", "filter": state_filter, "entries": shown, "next_cursor": next_cursor}
    out["more"] = more
    if more:
        out["hint"] = f"more entries: call receive_message(cursor={next_cursor}, state={state_filter!r})"
    elif any(e.get("reply_owed") for e in shown):
        out["hint"] = "entries with reply_owed are asks waiting for you: answer each with reply(message_id, text)"
    return out
