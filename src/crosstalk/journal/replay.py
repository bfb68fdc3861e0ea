"""Rebuilding an agent's state from its journal: dedupe keys, message states, tasks, routes, obligations, claims.

The same `apply` runs during replay and live (the receiver applies each record right after it is durable), so
what a restarted agent knows is exactly what the running one knew at its last acknowledgement.

The state is bounded, whatever the number of messages handled (journal/window.py holds the bounds): every message
still owed something is kept whole, and of the settled ones only the newest `max_settled`; an older settled message
leaves only its dedupe answer, in the dedupe window (the newest `DEDUPE_WINDOW`, at most 24 h old), which
compaction writes to the file as checkpoint records. Terminal tasks, settled obligations and routes, sent records
and notified held sends are kept to the newest `max_settled` of each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from crosstalk.core.states import UNRESOLVED_STATES, State
from crosstalk.journal import records as R
from crosstalk.journal.window import MAX_SETTLED, DedupeWindow, trim_settled

TERMINAL_TASK_STATES = frozenset({"completed", "failed", "canceled", "rejected"})
_SETTLED_OBLIGATION_STATES = ("delivered", "closed")  # a reply no longer owed
_KEPT_STATES = frozenset({State.SUBMITTED, State.DISPATCHING, State.HELD})  # a later record will still move them
_NEEDS_SESSION = UNRESOLVED_STATES | {State.UNREACHABLE}  # until resolved, receive_message lists them by default


def _terminal_task(_tid: str, task: dict[str, Any]) -> bool:
    return task.get("state") in TERMINAL_TASK_STATES


@dataclass(slots=True)
class MessageEntry:
    """One inbound message as the journal knows it."""

    message: dict[str, Any]
    sender: dict[str, Any]
    transport: str
    dedupe_key: str | None
    binding: dict[str, Any] | None
    ts: float
    native: bool = False
    state: State = State.SUBMITTED
    reason: str | None = None
    claimed: bool = False  # a dispatch claim was journaled
    resolved: bool = False  # the agent has dealt with it in its mailbox
    evidence: dict[str, Any] = field(default_factory=dict)
    seq: int = 0  # position in the journal: the mailbox cursor
    outcome_ts: float | None = None  # when its first outcome was journaled: the delivery an inform route counts from

    @property
    def message_id(self) -> str:
        return str(self.message["message_id"])

    @property
    def withheld(self) -> bool:
        """The receiving session's user (or their settings) has not let its model see this message: still held,
        or settled by the harness's later word as anything but delivered, or refused by the user's settings."""
        if self.state is State.HELD:
            return True
        return self.state is not State.ACCEPTED and bool(self.evidence.get("late") or self.evidence.get("withheld"))

    @property
    def unresolved(self) -> bool:
        return not self.resolved and self.state in UNRESOLVED_STATES


@dataclass(slots=True)
class JournalState:
    messages: dict[str, MessageEntry] = field(default_factory=dict)
    dedupe: dict[tuple[str, str], str] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    routes: dict[str, dict[str, Any]] = field(default_factory=dict)
    obligations: dict[str, dict[str, Any]] = field(default_factory=dict)
    claim: dict[str, Any] | None = None  # the latest claim record, if any
    sent: dict[str, dict[str, Any]] = field(default_factory=dict)
    held_sends: dict[str, dict[str, Any]] = field(default_factory=dict)  # outbound messages held, then settled
    records_applied: int = 0
    max_settled: int = MAX_SETTLED  # settled messages (and terminal tasks, ...) kept whole: the newest this many
    window: DedupeWindow = field(default_factory=DedupeWindow)  # the dedupe answers of settled messages let go
    gone_tasks: DedupeWindow = field(default_factory=DedupeWindow)  # terminal tasks let go (compaction drops them)
    # Kept up to date by apply() where a state changes: admission asks for these on every message, so they must
    # not scan history.
    _pending: set[str] = field(default_factory=set)
    _open_obligations: set[str] = field(default_factory=set)
    _trim_at: dict[str, int] = field(default_factory=dict)  # per table, the size at which the next trim runs

    @classmethod
    def replay(cls, records: Iterable[dict[str, Any]], *, max_settled: int = MAX_SETTLED) -> JournalState:
        state = cls(max_settled=max_settled)
        for rec in records:
            state.apply(rec)
        return state

    def apply(self, rec: dict[str, Any]) -> None:
        self.records_applied += 1
        rtype = rec.get("type")
        mid = R.message_id_of(rec)
        entry: MessageEntry | None
        if rtype == R.RECEIVED:
            if mid is None:
                return
            entry = MessageEntry(
                message=rec["message"],
                sender=rec.get("sender") or {},
                transport=rec.get("transport", "uds"),
                dedupe_key=rec.get("dedupe_key"),
                binding=rec.get("binding"),
                ts=float(rec.get("ts", 0.0)),
                native=bool(rec.get("native")),
                seq=self.records_applied,
            )
            self.messages[mid] = entry
            self._pending.add(mid)
            if entry.dedupe_key:
                self.dedupe[(entry.dedupe_key, mid)] = mid
            self._trim("messages", self.messages, self._settled_message, self._let_message_go)
        elif rtype == R.DISPATCH and mid is not None:
            entry = self.messages.get(mid)
            if entry is not None and entry.state is State.SUBMITTED:
                entry.claimed = True
                entry.state = State.DISPATCHING
        elif rtype == R.OUTCOME and mid is not None:
            entry = self.messages.get(mid)
            if entry is not None:
                try:
                    entry.state = State(rec.get("state", ""))
                except ValueError:
                    entry.state = State.UNKNOWN
                entry.reason = rec.get("reason")
                entry.evidence = rec.get("evidence") or {}
                if entry.outcome_ts is None:
                    entry.outcome_ts = float(rec.get("ts", 0.0))
                if entry.state in (State.SUBMITTED, State.DISPATCHING):
                    self._pending.add(mid)
                else:
                    self._pending.discard(mid)
        elif rtype == R.RESOLVED and mid is not None:
            entry = self.messages.get(mid)
            if entry is not None:
                entry.resolved = True
        elif rtype == R.CLAIM:
            self.claim = rec
        elif rtype == R.CHECKPOINT:
            self.window.load(rec.get("entries"), skip=self.messages)
        elif rtype == R.SENT:
            if mid is not None:
                self.sent[mid] = rec
                self._trim("sent", self.sent, lambda _m, _r: True)
        elif rtype == R.TASK:
            if isinstance(rec.get("task_id"), str):
                self.tasks[rec["task_id"]] = {**self.tasks.get(rec["task_id"], {}), **rec}
                self._trim("tasks", self.tasks, _terminal_task, self._let_task_go)
        elif rtype == R.ROUTE:
            if mid is not None:
                self.routes[mid] = {**self.routes.get(mid, {}), **rec}
                self._trim("routes", self.routes, lambda _m, r: r.get("state") != "open")
        elif rtype == R.HELD_SEND:
            if mid is not None:
                self.held_sends[mid] = {**self.held_sends.get(mid, {}), **rec}
                self._trim("held_sends", self.held_sends, lambda _m, r: bool(r.get("notified")))
        elif rtype == R.OBLIGATION and mid is not None:
            obligation = self.obligations[mid] = {**self.obligations.get(mid, {}), **rec}
            if obligation.get("state") in _SETTLED_OBLIGATION_STATES:
                self._open_obligations.discard(mid)
            else:
                self._open_obligations.add(mid)
            self._trim("obligations", self.obligations, self._settled_obligation)

    # ----------------------------------------------------------------- bounds
    def _trim(
        self,
        name: str,
        table: dict[str, Any],
        settled: Callable[[str, Any], bool],
        let_go: Callable[[str, Any], None] | None = None,
    ) -> None:
        """Let go of the oldest settled items of `table` past `max_settled`; runs again only after the table grew
        by a slack, so a table full of unsettled items costs one scan per slack inserts, not one per insert."""
        if len(table) <= self._trim_at.get(name, self.max_settled):
            return
        trim_settled(table, self.max_settled, settled, let_go)
        self._trim_at[name] = max(self.max_settled, len(table)) + max(16, self.max_settled // 8)

    def _settled_message(self, mid: str, entry: MessageEntry) -> bool:
        """Owed nothing any more: its delivery is final, nothing about it needs the session (the mailbox's
        default view), no reply is owed for it and no open task holds it."""
        if entry.state in _KEPT_STATES or (not entry.resolved and entry.state in _NEEDS_SESSION):
            return False
        if mid in self._open_obligations:
            return False
        tid = entry.message.get("task_id")
        if not isinstance(tid, str):
            return True
        task = self.tasks.get(tid)
        return task is None or _terminal_task(tid, task)

    def _settled_obligation(self, mid: str, _obligation: dict[str, Any]) -> bool:
        """No reply owed, and its message already let go (the reply tool reads both: one reply per message)."""
        return mid not in self._open_obligations and mid not in self.messages

    def _let_message_go(self, mid: str, entry: MessageEntry) -> None:
        if entry.dedupe_key:
            self.dedupe.pop((entry.dedupe_key, mid), None)
        self._pending.discard(mid)
        self.window.add(mid, entry.dedupe_key, entry.state.value, entry.reason, entry.ts)

    def _let_task_go(self, tid: str, task: dict[str, Any]) -> None:
        self.gone_tasks.add(tid, None, str(task.get("state")), None, float(task.get("ts", 0.0)))

    def knows(self, message_id: str) -> bool:
        """Whether this message id was received here: kept whole, or let go within the dedupe window."""
        return message_id in self.messages or message_id in self.window

    def collapsible_ids(self) -> set[str]:
        """The ids whose records compaction may drop whatever their age: settled messages whose dedupe answer the
        window holds (written to the checkpoint instead), and terminal tasks let go."""
        return self.window.ids() | self.gone_tasks.ids()

    # ----------------------------------------------------------------- queries
    def lookup_dedupe(self, dedupe_key: str, message_id: str) -> MessageEntry | None:
        """The message a retry repeats: kept whole, or (its body let go) a stub of its final state from the dedupe
        window."""
        mid = self.dedupe.get((dedupe_key, message_id))
        if mid:
            return self.messages.get(mid)
        known = self.window.get(message_id)
        if known is None or known.dedupe_key != dedupe_key:
            return None
        try:
            state = State(known.state)
        except ValueError:
            state = State.UNKNOWN
        message = {"message_id": message_id}
        return MessageEntry(message, {}, "", dedupe_key, None, known.ts, state=state, reason=known.reason)

    def unresolved_ids(self) -> set[str]:
        """Ids whose whole dependency set retention must keep."""
        ids = {mid for mid, e in self.messages.items() if e.unresolved}
        ids |= {tid for tid, t in self.tasks.items() if t.get("state") not in TERMINAL_TASK_STATES}
        ids |= {mid for mid, r in self.routes.items() if r.get("state") == "open"}
        ids |= self._open_obligations
        ids |= {mid for mid, r in self.held_sends.items() if not r.get("notified")}
        return ids

    def prune(self, keep_ids: set[str], cutoff: float) -> int:
        """Forget what retention dropped from the file: messages older than `cutoff` whose ids it did not keep.
        Newer entries stay even if the compaction never saw them (they arrived while it ran)."""
        dropped = [mid for mid, e in self.messages.items() if e.ts < cutoff and mid not in keep_ids]
        for mid in dropped:
            entry = self.messages.pop(mid)
            if entry.dedupe_key:
                self.dedupe.pop((entry.dedupe_key, mid), None)
            self._pending.discard(mid)
        for mid in [m for m, rec in self.sent.items() if float(rec.get("ts", 0)) < cutoff and m not in keep_ids]:
            del self.sent[mid]
        for mid in [m for m, r in self.held_sends.items() if float(r.get("ts", 0)) < cutoff and m not in keep_ids]:
            del self.held_sends[mid]
        self.window.expire(cutoff)
        self.gone_tasks.expire(cutoff)
        return len(dropped)

    def pending_count(self) -> int:
        """Messages journaled but without an outcome yet (constant time)."""
        return len(self._pending)

    def open_asks(self) -> int:
        """Reply obligations not yet delivered or closed (constant time)."""
        return len(self._open_obligations)

    def reply_owed(self, message_id: str) -> bool:
        """Whether a reply is still owed for this inbound ask (its obligation is neither delivered nor closed)."""
        return message_id in self._open_obligations

    def pending_asks(self) -> int:
        """Asks journaled but not yet settled (bounded by the pending count, not the history)."""
        return sum(1 for mid in self._pending if (e := self.messages.get(mid)) and e.message.get("kind") == "ask")
