"""After replay: settle every message a crash left between acceptance and outcome. Nothing is re-injected.

- dispatch claimed, no outcome → unknown (there is no evidence either way), or unreachable if the record was bound
  to another conversation;
- journaled, never claimed → the hop, policy and size checks run again: a pass becomes recovered (it shows in the
  mailbox, never injected) or unreachable in another conversation; a failure becomes rejected;
- held by the harness for its user → unknown: the harness says what its user did to the process that wrote the
  message (Claude checks the reply socket's owner), which is gone.

A task's submitted message is left alone: the task service dispatches or withdraws it (tasks/restart.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import Outcome, Reason, State
from crosstalk.journal import JournalState, MessageEntry
from crosstalk.journal import records as R
from crosstalk.receiver.inbound import Inbound

HELD_LOST = (
    "held_when_restarted: the session was holding it for its user when this agent restarted, and the harness tells "
    "only the process that wrote it what the user did"
)
Recheck = Callable[[Inbound], str | None]  # hop, policy and size checks with no load: a reason, or None


def settle_crashed(state: JournalState, binding: dict[str, Any], recheck: Recheck) -> list[dict[str, Any]]:
    """The outcome records that settle what a crash left open (not yet written)."""
    written: list[dict[str, Any]] = []
    for entry in list(state.messages.values()):
        if entry.state is State.HELD:
            written.append(R.outcome(entry.message_id, State.UNKNOWN, HELD_LOST, binding, reconciled=True))
            continue
        if entry.state not in (State.SUBMITTED, State.DISPATCHING):
            continue
        if entry.message.get("task_id") and entry.state is State.SUBMITTED:
            continue
        same = same_binding(entry.binding, binding)
        if entry.state is State.DISPATCHING:
            state_, reason = (
                (State.UNKNOWN, "crashed_during_dispatch")
                if same
                else (State.UNREACHABLE, "bound_to_another_conversation")
            )
        else:
            failed = _recheck(entry, recheck)
            if failed:
                state_, reason = State.REJECTED, failed
            elif same:
                state_, reason = State.RECOVERED, "journaled_before_crash"
            else:
                state_, reason = State.UNREACHABLE, "bound_to_another_conversation"
        written.append(R.outcome(entry.message_id, state_, reason, binding, reconciled=True))
    return written


def _recheck(entry: MessageEntry, recheck: Recheck) -> str | None:
    try:
        msg = Message.from_dict(entry.message, check_size=False)  # size is admission's to judge
        sender = Sender.from_dict(entry.sender)
    except (ValueError, KeyError):
        return "unreadable_record"
    return recheck(Inbound(msg, sender, entry.transport, native=entry.native))


def same_binding(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    if not a:
        return False
    return a.get("session_ref") == b.get("session_ref") and a.get("endpoint") == b.get("endpoint")


def outcome_of(entry: MessageEntry, *, duplicate: bool) -> Outcome:
    """What a message the journal already settled is answered with (again, to a duplicate)."""
    evidence = {"duplicate": True} if duplicate else {}
    if entry.state in (State.SUBMITTED, State.DISPATCHING):
        # Claimed but no durable outcome (its outcome write failed, or the call died): ambiguous, never resent.
        return Outcome(entry.message_id, State.UNKNOWN, entry.reason or Reason.NO_DURABLE_OUTCOME, evidence)
    if entry.state is State.RECOVERED:
        # A mailbox-only state: it was journaled before a crash and never dispatched. The sender learns
        # only that delivery is not proven; the receiving agent finds the message in its mailbox.
        return Outcome(entry.message_id, State.UNKNOWN, Reason.RECOVERED_TO_MAILBOX, evidence)
    return Outcome(entry.message_id, entry.state, entry.reason, evidence)
