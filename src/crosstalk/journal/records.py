"""Journal record builders. Every record is a JSON object with a `type`, a `ts` (epoch seconds) and, where it
matters, the `binding` (instance, session_ref, endpoint) it was written under: records bound to another
conversation are never injected or routed into the current one."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import State

RECEIVED = "received"  # an inbound message passed the chain's checks and is now owed an outcome
DISPATCH = "dispatch"  # the dispatch claim: the harness write may start after this is durable
OUTCOME = "outcome"  # the final (or reconciled) delivery state of an inbound message
REJECTED = "rejected"  # audit of a refused inbound message (no body; acknowledges nothing)
RESOLVED = "resolved"  # a mailbox entry the agent has dealt with (retention may then drop it)
CLAIM = "claim"  # a claim on / release of this agent by an owner
SENT = "sent"  # an outbound message this agent sent, with its answer
TASK = "task"  # an A2A task change (kept generic here; the A2A ingress owns its fields)
ROUTE = "route"  # a reply route (an outbound ask awaiting its answer)
OBLIGATION = "obligation"  # a reply owed for an inbound ask; or a reply made to an inbound inform (inform_reply)
NUDGE = "nudge"  # the send-count nudge fired for a peer
BOUNCED = "bounced"  # a native reply bounced back into this agent's own session
HELD_SEND = "held_send"  # an outbound message the receiving harness held for its user, until its final word
CHECKPOINT = "checkpoint"  # written by compaction: dedupe answers of settled messages whose records it dropped


def _base(rtype: str, binding: dict[str, Any] | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": rtype, "ts": round(time.time(), 6)}
    if binding is not None:
        rec["binding"] = binding
    return rec


def message_id_of(rec: Mapping[str, Any]) -> str | None:
    """The message a record belongs to: the id in the body of the records that carry the message (received,
    sent), the `message_id` field of every other (dispatch, outcome, resolved, rejected, task, obligation, ...).
    None when the record names no message."""
    if rec.get("type") in (RECEIVED, SENT):
        msg = rec.get("message")
        mid = msg.get("message_id") if isinstance(msg, Mapping) else None
    else:
        mid = rec.get("message_id")
    return mid if isinstance(mid, str) else None


def binding(instance_id: str, session_ref: str, endpoint: str | None = None) -> dict[str, Any]:
    return {"instance_id": instance_id, "session_ref": session_ref, "endpoint": endpoint}


def received(
    msg: Message, sender: Sender, *, dedupe_key: str | None, transport: str, bind: dict[str, Any], native: bool = False
) -> dict[str, Any]:
    rec = _base(RECEIVED, bind)
    rec.update(
        message=msg.to_dict(), sender=sender.to_dict(), dedupe_key=dedupe_key, transport=transport, native=native
    )
    return rec


def dispatch(message_id: str, bind: dict[str, Any]) -> dict[str, Any]:
    rec = _base(DISPATCH, bind)
    rec["message_id"] = message_id
    return rec


def outcome(
    message_id: str,
    state: State,
    reason: str | None,
    bind: dict[str, Any],
    evidence: dict[str, Any] | None = None,
    *,
    reconciled: bool = False,
) -> dict[str, Any]:
    rec = _base(OUTCOME, bind)
    rec.update(message_id=message_id, state=state.value, reason=reason)
    if evidence:
        rec["evidence"] = evidence
    if reconciled:
        rec["reconciled"] = True
    return rec


def rejected(
    msg: Message | None, sender: Sender, reason: str, *, transport: str, message_id: str | None = None
) -> dict[str, Any]:
    rec = _base(REJECTED)
    rec.update(
        message_id=msg.message_id if msg else message_id,
        kind=msg.kind.value if msg else None,
        text_bytes=msg.text_bytes() if msg else None,
        sender=sender.to_dict(),
        transport=transport,
        reason=reason,
    )
    return rec


def resolved(message_id: str, how: str) -> dict[str, Any]:
    rec = _base(RESOLVED)
    rec.update(message_id=message_id, how=how)
    return rec


def claim(action: str, owner: str | None, owner_name: str | None, role: str) -> dict[str, Any]:
    rec = _base(CLAIM)
    rec.update(action=action, owner=owner, owner_name=owner_name, role=role)
    return rec


def sent(msg: Message, to_agent: str | None, state: str, reason: str | None) -> dict[str, Any]:
    rec = _base(SENT)
    rec.update(message=msg.to_dict(), to_agent=to_agent, state=state, reason=reason)
    return rec


def inform_reply(
    message_id: str, reply_id: str, text: str, to_agent: str, result: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A reply this agent made to an inbound inform (the shim's reply tool): an `obligation` record that is closed
    from the start (an inform owes nothing, so it never counts as an open ask), keyed by the inform's message_id so
    "one reply per inbound message" survives a restart. Written twice: before the reply is sent (no `result`; a
    repeat after a crash resends the same reply_id, which the receiver dedupes) and after, with the tool's result."""
    rec = _base(OBLIGATION)
    rec.update(
        message_id=message_id,
        task_id=None,
        kind="inform",
        state="closed",
        reason="replied",
        reply_id=reply_id,
        text=text,
        to_agent=to_agent,
    )
    if result is not None:
        rec["result"] = result
    return rec


def held_send(
    message_id: str,
    state: str,
    reason: str | None,
    *,
    to: str,
    to_agent: str | None = None,
    task_id: str | None = None,
    notified: bool = False,
    was: str | None = None,
) -> dict[str, Any]:
    """An outbound message held by the receiving session (state held, with what to watch: the target agent's task,
    or none for a session without crosstalk), then its final word (`notified`: the sending session was told; `was`:
    what it waited as, held or queued)."""
    rec = _base(HELD_SEND)
    rec.update(message_id=message_id, state=state, reason=reason, to=to)
    if to_agent is not None:
        rec["to_agent"] = to_agent
    if task_id is not None:
        rec["task_id"] = task_id
    if notified:
        rec["notified"] = True
    if was is not None:
        rec["was"] = was
    return rec


def checkpoint(entries: list[Any]) -> dict[str, Any]:
    """Compaction's summary of settled messages whose records it dropped (journal/window.py): `entries` is flat,
    five values an entry (message_id, dedupe_key, state, reason, ts). It names no message itself, so retention never
    groups it."""
    rec = _base(CHECKPOINT)
    rec["entries"] = entries
    return rec
