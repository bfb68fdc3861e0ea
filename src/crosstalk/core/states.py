"""Delivery states, the reasons crosstalk gives, and the one answer record (Outcome) every edge shows.

The receiver chain decides an Outcome once per message; the task service stamps it with its task and moves it on
(replied, expired, canceled); the socket, A2A, the MCP tools, the CLI and the pi link each encode that same record
into their own wire form and read it back with `Outcome.from_dict`.
"""

from __future__ import annotations

from crosstalk.core.record import Record
from crosstalk.core.strenum import StrEnum

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class State(StrEnum):
    # Answers a sender can get.
    ACCEPTED = "accepted"  # injected with harness evidence
    QUEUED = "queued"  # verified no-wake hand-off; the model sees it on its next request
    HELD = "held"  # the harness took it and holds it for the receiving user; a final state follows
    REJECTED = "rejected"  # policy, auth, admission, hop or kind failure; never injected
    UNREACHABLE = "unreachable"  # definite refusal or pre-send failure; nothing reached the session
    UNKNOWN = "unknown"  # ambiguous failure after the dispatch claim; never resent
    # Mailbox-only states (receive_message), never a send answer.
    RECOVERED = "recovered"  # journaled before a crash, never dispatched; surfaced, not injected
    BOUNCED = "bounced"  # a native reply the agent bounced back to its own session
    # Journal-internal states.
    SUBMITTED = "submitted"  # journaled, not yet claimed for dispatch
    DISPATCHING = "dispatching"  # claimed for dispatch; the harness write may be under way
    # Task answers: what the sender of a task's message is told after its delivery. Never a message's journal state.
    REPLIED = "replied"  # the ask was answered (the reply is in the task)
    EXPIRED = "expired"  # the ask's deadline passed without a reply
    CANCELED = "canceled"  # its creator canceled the task before dispatch
    INPUT_REQUIRED = "input_required"  # the receiver asked the creator for more on the task
    # Call answers: a tool call that never became a message. Never journaled.
    UNBOUND = "unbound"  # the call proved no session to send as
    INVALID_ARGUMENTS = "invalid_arguments"  # the call's arguments do not make a message
    ERROR = "error"  # no such tool


SEND_STATES = frozenset({State.ACCEPTED, State.QUEUED, State.HELD, State.REJECTED, State.UNREACHABLE, State.UNKNOWN})
DELIVERED_STATES = frozenset({State.ACCEPTED, State.QUEUED})
# A held message settles later, once the harness says what its user did: accepted or queued (delivered, as the
# harness says it delivers), rejected (denied, refused), unreachable (expired, dropped) or unknown (its word can no
# longer reach us). A queued one may still be lost later: unreachable (the session exited with it unread).
LATE_STATES = frozenset({State.ACCEPTED, State.QUEUED, State.REJECTED, State.UNREACHABLE, State.UNKNOWN})
UNRESOLVED_STATES = frozenset({State.SUBMITTED, State.DISPATCHING, State.HELD, State.UNKNOWN, State.RECOVERED})
# Answers a model must read as a failure of its call (the MCP result's isError).
ERROR_STATES = frozenset(
    {State.UNBOUND, State.INVALID_ARGUMENTS, State.REJECTED, State.UNREACHABLE, State.ERROR, State.EXPIRED}
)


class Reason(StrEnum):
    """The reasons crosstalk itself gives. A policy refusal reads "<family>:<detail>" (acl:, kind:, admission:,
    hop:, native:, invalid:) and a harness may give its own words: those stay plain strings."""

    # The receiver chain.
    PONG = "pong"
    MESSAGE_ID_IN_USE = "message_id_in_use"
    JOURNAL_WRITE_FAILED = "journal_write_failed"
    JOURNAL_WRITE_FAILED_AFTER_DISPATCH = "journal_write_failed_after_dispatch"
    NO_DURABLE_OUTCOME = "no_durable_outcome"
    RECOVERED_TO_MAILBOX = "recovered_to_mailbox"
    NATIVE_REPLY_BOUNCED = "native_reply_bounced"
    INJECT_TIMEOUT = "inject_timeout"
    SESSION_STALLED = "session_stalled"
    MALFORMED_HARNESS_ANSWER = "malformed_harness_answer"
    # Tasks.
    DEADLINE_PASSED = "deadline_passed"
    CANCELED_BY_CREATOR = "canceled_by_creator"
    RESTARTED_DURING_DISPATCH = "restarted_during_dispatch"
    UNREADABLE_RECORD = "unreadable_record"
    TASK_ENDED = "task_ended"  # a queued message not written: its task ended before it
    # The sending side.
    NO_SUCH_AGENT = "no_such_agent"
    AMBIGUOUS_NAME = "ambiguous_name"
    NO_A2A_ENDPOINT = "no_a2a_endpoint"
    NO_SENDER_TOKEN = "no_sender_token"
    RECEIVER_JOURNAL_FAILED = "receiver_journal_failed"
    NO_ANSWER = "no_answer"
    CONNECTION_FAILED = "connection_failed"
    TOKEN_REFUSED = "token_refused"
    PROTOCOL_ERROR = "protocol_error"
    JOURNAL_FAILED = "journal_failed"
    ASKER_GONE = "asker_gone"
    # Tool calls.
    NO_BINDING_EVIDENCE = "no_binding_evidence"
    SHUTTING_DOWN = "shutting_down"
    REGISTRATION_FAILED = "registration_failed"
    UNKNOWN_TOOL = "unknown_tool"
    REPLY_NOT_RECORDED = "reply_not_recorded"


_STATES = {s.value: s for s in State}
_REASONS = {r.value: r for r in Reason}
# Evidence a model reads in a tool answer (the rest is for the journal and the CLI's --json): that a message went
# natively to a session without crosstalk, and what to do about a refusal decided on the sending side.
SHOWN_EVIDENCE = ("native", "hint", "settles")  # settles: a queued message's hand-over is told later


def parse_reason(value: str | None) -> str | None:
    """A reason as the record holds it: the Reason member for crosstalk's own codes, else the text as given."""
    return None if value is None else _REASONS.get(value, value)


class Outcome(Record):
    """The delivery answer: what the receiver chain decided for one message, as every edge shows it. `task_id` is
    set once the message belongs to an A2A task; `evidence` holds the harness's proof (and duplicate, late, ping).
    A Record (core/record.py), not a dataclass: `crosstalk send` builds one on its start-up path."""

    _fields = ("message_id", "state", "reason", "evidence", "task_id")
    __slots__ = _fields
    message_id: str
    state: State
    reason: str | None
    evidence: dict[str, Any]
    task_id: str | None

    def __init__(
        self,
        message_id: str,
        state: State,
        reason: str | None = None,
        evidence: dict[str, Any] | None = None,
        task_id: str | None = None,
    ) -> None:
        self._set(message_id, state, reason, {} if evidence is None else evidence, task_id)

    @property
    def delivered(self) -> bool:
        return self.state in DELIVERED_STATES

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message_id": self.message_id, "state": self.state.value}
        if self.reason:
            out["reason"] = str(self.reason)
        if self.task_id:
            out["task_id"] = self.task_id
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out

    @classmethod
    def from_dict(cls, data: object) -> Outcome:
        """The record `to_dict` wrote. Raises ValueError on anything else: unknown keys or states, wrong types."""
        if not isinstance(data, dict):
            raise ValueError(f"an outcome must be an object, got {type(data).__name__}")
        unknown = set(data) - {"message_id", "state", "reason", "task_id", "evidence"}
        if unknown:
            raise ValueError(f"unknown outcome fields: {', '.join(sorted(map(str, unknown)))}")
        mid, state, reason = data.get("message_id"), data.get("state"), data.get("reason")
        task_id, evidence = data.get("task_id"), data.get("evidence", {})
        if not isinstance(mid, str):
            raise ValueError("outcome.message_id must be a string")
        if not isinstance(state, str) or state not in _STATES:
            raise ValueError(f"outcome.state {state!r} is not a delivery state")
        if reason is not None and (not isinstance(reason, str) or not reason):
            raise ValueError("outcome.reason must be a non-empty string")
        if task_id is not None and (not isinstance(task_id, str) or not task_id):
            raise ValueError("outcome.task_id must be a non-empty string")
        if not isinstance(evidence, dict) or not all(isinstance(k, str) for k in evidence):
            raise ValueError("outcome.evidence must be an object")
        return cls(mid, _STATES[state], parse_reason(reason), dict(evidence), task_id)

    def answer(self, **extra: Any) -> dict[str, Any]:
        """The flat form a model reads (an MCP tool result, the pi link): state, reason, the ids, the evidence it
        shows, then the edge's own `extra` (to, hint, reply, …; None values are left out)."""
        out: dict[str, Any] = {"state": self.state.value}
        if self.reason:
            out["reason"] = str(self.reason)
        if self.message_id:
            out["message_id"] = self.message_id
        if self.task_id:
            out["task_id"] = self.task_id
        out.update((k, self.evidence[k]) for k in SHOWN_EVIDENCE if k in self.evidence)
        out.update((k, v) for k, v in extra.items() if v is not None)
        return out
