"""The in-memory task table and the journal records it is folded from.

Every change to a task is one `task` record in the agent's journal; `TaskTable.apply` folds a record into the table
the same way during replay and live, so a restarted agent knows exactly what the running one knew.

The table is bounded like the journal state (journal/window.py): every unfinished task is kept, and of the
terminal ones only the newest `MAX_SETTLED` (GetTask on an older one answers not found, as past retention).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from crosstalk.core.errors import TaskError
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import Outcome
from crosstalk.core.tasks import TERMINAL, Artifact, HistoryEntry, TaskPage, TaskState, TaskView
from crosstalk.journal import records as R
from crosstalk.journal.window import MAX_SETTLED, trim_settled


@dataclass(slots=True)
class TaskEntry:
    view: TaskView
    claimed: bool = False  # the worker took its first message: from here on cancelable only while input_required
    messages: list[str] = field(default_factory=list)  # every message id of the task (first + continuations)
    _changed: asyncio.Event | None = None  # made when someone waits: a kept terminal task holds none
    deadline: asyncio.TimerHandle | None = None
    awaiting: bool = False  # the receiving side said it will answer (expect_answer): delivery does not complete it
    input_turn: str | None = None  # the continuation that answered an input request: it settles like a first message
    _lock: asyncio.Lock | None = None  # made on the first record: a kept terminal task holds none
    # The message of it the worker took from its queue, until the harness call is over: a cancel now is refused.
    sending: str | None = None
    canceling: bool = False  # a cancel is being made durable: the worker waits for its end before taking a message

    @property
    def lock(self) -> asyncio.Lock:
        """Held across each change's decide, build, journal append and apply (tasks/ledger.py): one change to a
        task at a time, each built from the state the one before it left."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    @property
    def changed(self) -> asyncio.Event:
        """Set when the task changes (a waiter takes it, then waits); a new, unset one after each change."""
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def notify(self) -> None:
        """The task changed: wake whoever waits on `changed`; the next waiter gets a fresh event."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None


class TaskTable:
    """Tasks by id, and the task each message id belongs to."""

    def __init__(self, text_of: Callable[[str], str], *, max_terminal: int = MAX_SETTLED) -> None:
        self.tasks: dict[str, TaskEntry] = {}
        self.task_of_message: dict[str, str] = {}
        self._text_of = text_of  # the text of a received message, for history entries that only reference it
        self.max_terminal = max_terminal  # terminal tasks kept, the newest
        self._trim_at = max_terminal  # the table size at which the next trim runs

    def get(self, task_id: str) -> TaskEntry | None:
        return self.tasks.get(task_id)

    def own(self, sender_agent_id: str, task_id: str) -> TaskEntry:
        task = self.tasks.get(task_id)
        if task is None or task.view.creator != sender_agent_id:
            raise TaskError(TaskError.NOT_FOUND, f"no task {task_id} of yours here")
        return task

    def holding(self, message_id: str) -> TaskEntry | None:
        tid = self.task_of_message.get(message_id)
        return self.tasks.get(tid) if tid else None

    def prune(self, keep_ids: set[str], cutoff: float) -> int:
        """Forget terminal tasks that retention dropped from the journal (older than `cutoff`, not kept)."""
        gone = [
            tid
            for tid, t in self.tasks.items()
            if t.view.terminal and t.view.updated_at < cutoff and tid not in keep_ids
        ]
        for tid in gone:
            self._forget(tid, self.tasks.pop(tid))
        return len(gone)

    def _forget(self, _tid: str, task: TaskEntry) -> None:
        for mid in task.messages:
            self.task_of_message.pop(mid, None)

    def _trim(self) -> None:
        """Let go of the oldest terminal tasks past `max_terminal`; again only after the table grew by a slack."""
        if len(self.tasks) <= self._trim_at:
            return
        trim_settled(self.tasks, self.max_terminal, lambda _tid, t: t.view.terminal, self._forget)
        self._trim_at = max(self.max_terminal, len(self.tasks)) + max(16, self.max_terminal // 8)

    def apply(self, rec: dict[str, Any]) -> TaskEntry:
        """Fold one task record into the in-memory task (during replay and live)."""
        tid = rec["task_id"]
        task = self.tasks.get(tid)
        entry: HistoryEntry | None = None
        mid = rec.get("message_id") or ""
        if rec.get("entry") == "user":
            text = rec.get("text")
            if text is None:
                text = self._text_of(mid)
            entry = HistoryEntry(mid, "user", text, rec.get("meta") or {})
        elif rec.get("entry") == "agent":
            entry = HistoryEntry(mid, "agent", rec.get("text") or "")
        state = TaskState(rec.get("state", "submitted"))
        answer = _answer_of(rec)
        artifacts = tuple(Artifact.from_dict(a) for a in rec.get("artifacts") or [] if isinstance(a, dict))
        if task is None:
            view = TaskView(
                task_id=tid,
                context_id=rec.get("context_id") or tid,
                creator=rec.get("creator") or "",
                kind=rec.get("kind") or "inform",
                state=state,
                reason=rec.get("reason"),
                delivery=rec.get("delivery"),
                answer=answer,
                history=(entry,) if entry else (),
                created_at=float(rec.get("ts", 0)),
                updated_at=float(rec.get("ts", 0)),
                deadline_at=rec.get("deadline_at"),
                artifacts=artifacts,
                direct=bool(rec.get("direct")),
            )
            task = TaskEntry(view)
            self._trim()  # before the new one joins: it is never the one let go
            self.tasks[tid] = task
        else:
            history = task.view.history
            if entry is not None and all(h.message_id != entry.message_id for h in history):
                history = (*history, entry)
            resumed = task.view.state is TaskState.INPUT_REQUIRED and state is TaskState.WORKING
            if resumed and entry is not None and entry.role == "user" and mid not in task.messages:
                # The input its receiver asked for (journaled with the task working again): it settles the task like
                # a first message, after a restart as before it.
                task.input_turn = mid
            if task.view.terminal and state not in TERMINAL:
                # A finished task never reopens: a change computed before it finished (a dispatch outcome racing
                # the session's reply) may still add history, but not undo the ending.
                state, reason, answer = task.view.state, task.view.reason, task.view.answer
            elif task.claimed and state is TaskState.SUBMITTED:
                # A continuation's record built before the worker claimed the task's first message (the claim is
                # in memory and in the message's dispatch record, not a task record): it stays working.
                state, reason = task.view.state, task.view.reason
            else:
                reason = rec.get("reason")
            task.view = replace(
                task.view,
                state=state,
                reason=reason,
                delivery=rec.get("delivery") or task.view.delivery,
                answer=answer or task.view.answer,
                history=history,
                updated_at=float(rec.get("ts", task.view.updated_at)),
                artifacts=(*task.view.artifacts, *(a for a in artifacts if a not in task.view.artifacts)),
                direct=task.view.direct or bool(rec.get("direct")),
            )
        if rec.get("entry") == "user" and mid and mid not in task.messages:
            task.messages.append(mid)
            self.task_of_message[mid] = tid
        if state in TERMINAL:
            task.claimed = True
            if task.deadline is not None:
                task.deadline.cancel()
                task.deadline = None
        task.notify()
        return task


def _answer_of(rec: dict[str, Any]) -> Outcome | None:
    """The creator's answer a task record holds (None: the record changes no answer, or predates answers)."""
    raw = rec.get("answer")
    if raw is None:
        return None
    try:
        return Outcome.from_dict(raw)
    except ValueError:
        return None  # a damaged field: the task keeps the answer it had


def page_of(
    views: Iterable[TaskView],
    sender_agent_id: str,
    *,
    page_size: int,
    page_token: str,
    context_id: str | None,
    state: TaskState | None,
    updated_after: float | None,
) -> TaskPage:
    """ListTasks over `views`: one page of the sender's own tasks, most recently updated first."""
    mine = [v for v in views if v.creator == sender_agent_id]
    if context_id:
        mine = [v for v in mine if v.context_id == context_id]
    if state is not None:
        mine = [v for v in mine if v.state is state]
    if updated_after is not None:
        mine = [v for v in mine if v.updated_at > updated_after]
    mine.sort(key=lambda v: (v.updated_at, v.task_id), reverse=True)  # A2A: most recently updated first
    start = decode_page_token(page_token)
    size = max(1, min(page_size or 50, 100))
    page = mine[start : start + size]
    nxt = encode_page_token(start + size) if start + size < len(mine) else ""
    return TaskPage(tuple(page), nxt, len(mine))


def task_record(
    view: TaskView,
    message_id: str,
    sender: Sender | None,
    *,
    entry_ref: str | None,
    text: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "type": R.TASK,
        "ts": round(time.time(), 6),
        "task_id": view.task_id,
        "context_id": view.context_id,
        "creator": view.creator,
        "creator_name": sender.name if sender else None,
        "kind": view.kind,
        "state": view.state.value,
        "reason": view.reason,
        "delivery": view.delivery,
        "answer": view.answer.to_dict() if view.answer is not None else None,
        "deadline_at": view.deadline_at,
        "message_id": message_id,
        "entry": entry_ref,
    }
    if text is not None:
        rec["text"] = text  # a reply, or a refused message: no received record holds this text
    if meta:
        rec["meta"] = meta
    return rec


def obligation_record(message_id: str, task_id: str, state: str, reason: str | None) -> dict[str, Any]:
    return {
        "type": R.OBLIGATION,
        "ts": round(time.time(), 6),
        "message_id": message_id,
        "task_id": task_id,
        "state": state,
        "reason": reason,
    }


def meta_of(msg: Message) -> dict[str, Any]:
    meta: dict[str, Any] = {"kind": msg.kind.value, "delivery": msg.delivery.value}
    if msg.in_reply_to:
        meta["in_reply_to"] = msg.in_reply_to
    if msg.deadline_seconds:
        meta["deadline_seconds"] = msg.deadline_seconds
    return meta


def encode_page_token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def decode_page_token(token: str) -> int:
    if not token:
        return 0
    try:
        kind, _, value = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        offset = int(value)
    except (ValueError, UnicodeDecodeError):
        raise TaskError(TaskError.INVALID, "page_token is not one this agent issued") from None
    if kind != "o" or offset < 0:
        raise TaskError(TaskError.INVALID, "page_token is not one this agent issued")
    return offset
