"""The task ledger: every change to a task is one durable `task` record, journaled through the receiver and then
folded into the table (durable, then apply). The receiving side's answers live here too: a session replies to a
task, asks its creator for input, or says it will answer (expect_answer); deadlines fail what is still open."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from crosstalk.core.errors import ErrorKind, TaskError
from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import SEND_STATES, Outcome, Reason, State
from crosstalk.core.tasks import Artifact, HistoryEntry, TaskState, TaskView
from crosstalk.journal import JournalError
from crosstalk.receiver import Receiver
from crosstalk.tasks.table import TaskEntry, TaskTable, meta_of, obligation_record, task_record

log = logging.getLogger(__name__)


class ReplyError(TaskError):
    """reply() refused: NO_SUCH_MESSAGE, NOT_AN_ASK, ALREADY_REPLIED or ASK_CLOSED."""

    NO_SUCH_MESSAGE = ErrorKind.NO_SUCH_MESSAGE
    NOT_AN_ASK = ErrorKind.NOT_AN_ASK
    ALREADY_REPLIED = ErrorKind.ALREADY_REPLIED
    ASK_CLOSED = ErrorKind.ASK_CLOSED


def is_ask(task: TaskEntry) -> bool:
    return task.view.kind == Kind.ASK.value


class TaskLedger:
    def __init__(self, receiver: Receiver, table: TaskTable) -> None:
        self.receiver = receiver
        self.table = table

    # ------------------------------------------------------------------ the receiving side
    def expect_answer(self, message_id: str) -> bool:
        """The receiving side will answer this message (reply or require_input), as a session answers an ask: its
        task then stays working after delivery instead of completing. Call it before the dispatch settles (from the
        harness's inject). False when no open task holds the message."""
        task = self.table.holding(message_id)
        if task is None or task.view.terminal:
            return False
        task.awaiting = True
        return True

    async def reply(
        self, message_id: str, text: str, *, artifacts: tuple[Artifact, ...] = (), direct: bool = False
    ) -> TaskView:
        """The receiving session answers an ask, or a message it said it would answer (expect_answer), through any
        message id of its task: the task completes with `text` as its final message ("" with artifacts: none) and
        `artifacts` as its outputs. `direct`: the creator's waiting SendMessage is answered with the reply as a
        Message rather than the Task (the task is kept, and journaled, all the same). One reply per task: the same
        text again returns the task, different text is ALREADY_REPLIED; after the deadline it is ASK_CLOSED."""
        task = self._answerable_task(message_id)
        async with task.lock:  # decided on the task as the change before this one left it
            return await self._reply(task, text, artifacts, direct)

    async def _reply(self, task: TaskEntry, text: str, artifacts: tuple[Artifact, ...], direct: bool) -> TaskView:
        if task.view.terminal:
            final = [h for h in task.view.history if h.role == "agent"]
            if task.view.state is TaskState.COMPLETED and (final or task.view.artifacts):
                if (final[-1].text if final else "") == text:
                    return task.view
                raise ReplyError(ReplyError.ALREADY_REPLIED, "this ask already has a different reply")
            raise ReplyError(ReplyError.ASK_CLOSED, f"the ask is {task.view.state.value} ({task.view.reason})")
        if not text and not artifacts:
            raise ReplyError(ReplyError.NOT_AN_ASK, "a reply needs text or artifacts")
        entry = HistoryEntry(new_message_id(), "agent", text) if text else None
        extra = [obligation_record(task.messages[0], task.view.task_id, "closed", "replied")] if is_ask(task) else []
        # An ask is answered; a message the receiver said it would answer was, for its sender, delivered.
        answer = task.view.answer
        if is_ask(task) or answer is None or not answer.delivered:
            answer = self.answer(task, State.REPLIED if is_ask(task) else State.ACCEPTED, None)
        await self.record_held(
            task,
            state=TaskState.COMPLETED,
            reason=None,
            answer=answer,
            entry=entry,
            artifacts=tuple(artifacts),
            direct=direct,
            extra=extra,
        )
        return task.view

    async def require_input(self, message_id: str, text: str) -> TaskView:
        """The receiving session needs more from the task's creator: the task becomes input_required (interrupted,
        not terminal; `text`, if any, is the agent's question). The creator's next message on the task resumes it."""
        task = self._answerable_task(message_id)
        async with task.lock:  # decided on the task as the change before this one left it
            if task.view.terminal:
                raise ReplyError(ReplyError.ASK_CLOSED, f"the task is {task.view.state.value} ({task.view.reason})")
            if task.view.state is TaskState.INPUT_REQUIRED:
                return task.view
            entry = HistoryEntry(new_message_id(), "agent", text) if text else None
            answer = self.answer(task, State.INPUT_REQUIRED, None)
            await self.record_held(task, state=TaskState.INPUT_REQUIRED, reason=None, entry=entry, answer=answer)
            return task.view

    def _answerable_task(self, message_id: str) -> TaskEntry:
        task = self.table.holding(message_id)
        if task is None:
            raise ReplyError(ReplyError.NO_SUCH_MESSAGE, f"no task holds message {message_id}")
        if not is_ask(task) and not task.awaiting:
            raise ReplyError(ReplyError.NOT_AN_ASK, f"message {message_id} is a {task.view.kind}, not an ask")
        return task

    # ------------------------------------------------------------------ the creator's side
    async def cancel(self, task: TaskEntry) -> None:
        """The creator cancels its task: one still queued, before the worker claimed it, or one waiting for its
        input, in both cases with none of its messages being written to the session (`sending`). Its messages still
        queued are never written (the worker skips a canceled task's); the caller withdraws them. Otherwise
        NOT_CANCELABLE."""
        async with task.lock:  # decided on the task as the change before this one left it
            waiting = task.view.state is TaskState.INPUT_REQUIRED
            queued = task.view.state is TaskState.SUBMITTED and not task.claimed
            if task.sending is not None or not (waiting or queued):
                why = "a message of it is being written to the session" if task.sending else "dispatched or finished"
                raise TaskError(
                    TaskError.NOT_CANCELABLE,
                    f"task {task.view.task_id} is {task.view.state.value} and {why}; it cannot be canceled",
                )
            first, tid = task.messages[0], task.view.task_id
            extra = [obligation_record(first, tid, "closed", "canceled")] if waiting and is_ask(task) else []
            canceled = self.answer(task, State.CANCELED, Reason.CANCELED_BY_CREATOR)
            # In this same step: the worker claims none of its messages until this record is durable (then it skips
            # them) or has failed (then it takes them as before).
            claimed, task.claimed, task.canceling = task.claimed, True, True
            try:
                await self.record_held(
                    task, state=TaskState.CANCELED, reason=Reason.CANCELED_BY_CREATOR, answer=canceled, extra=extra
                )
            except JournalError:
                task.claimed = claimed
                raise
            finally:
                task.canceling = False

    # ------------------------------------------------------------------ durable changes
    async def record(
        self,
        task: TaskEntry,
        *,
        state: TaskState,
        reason: str | None = None,
        answer: Outcome | None = None,
        entry: HistoryEntry | None = None,
        artifacts: tuple[Artifact, ...] = (),
        direct: bool = False,
        extra: list[dict[str, Any]] | None = None,
    ) -> None:
        """One durable change to a task, made after any change to it under way (its lock). `answer`: what its creator
        is told from now on; its delivery (the chain's state) follows the answer when the answer is one. A caller
        whose change depends on the task's state decides it under `task.lock` and calls `record_held`."""
        async with task.lock:
            await self.record_held(
                task,
                state=state,
                reason=reason,
                answer=answer,
                entry=entry,
                artifacts=artifacts,
                direct=direct,
                extra=extra,
            )

    async def record_held(
        self,
        task: TaskEntry,
        *,
        state: TaskState,
        reason: str | None = None,
        answer: Outcome | None = None,
        entry: HistoryEntry | None = None,
        artifacts: tuple[Artifact, ...] = (),
        direct: bool = False,
        extra: list[dict[str, Any]] | None = None,
    ) -> None:
        """`record`, the caller holding `task.lock`: the change is built from the task as it is now, made durable,
        then applied, with no other change to the task in between (two changes built from the same state would
        otherwise each land, the later one overwriting the other in memory and in the journal)."""
        assert task.lock.locked(), "record_held without the task's lock"
        answer = answer or task.view.answer
        delivery = answer.state.value if answer is not None and answer.state in SEND_STATES else task.view.delivery
        view = replace(task.view, state=state, reason=reason, delivery=delivery, answer=answer, updated_at=time.time())
        rec = task_record(
            view,
            entry.message_id if entry else (task.messages[0] if task.messages else ""),
            None,
            entry_ref=entry.role if entry else None,
            text=entry.text if entry else None,
        )
        if artifacts:
            rec["artifacts"] = [a.to_dict() for a in artifacts]
        if direct:
            rec["direct"] = True
        await self.receiver.record([rec, *(extra or [])])
        self.table.apply(rec)

    @staticmethod
    def answer(task: TaskEntry, state: State, reason: str | None) -> Outcome:
        """The creator's answer for a task-level decision (replied, expired, canceled, input required, refused),
        on the task's first message."""
        mid = task.messages[0] if task.messages else ""
        return Outcome(mid, state, reason, {}, task.view.task_id)

    def arm_deadline(self, task: TaskEntry, delay: float) -> None:
        loop = asyncio.get_running_loop()
        task.deadline = loop.call_later(delay, lambda: asyncio.ensure_future(self.expire(task.view.task_id)))

    async def expire(self, task_id: str) -> None:
        task = self.table.get(task_id)
        if task is None or task.view.terminal:
            return
        first = task.messages[0] if task.messages else task_id
        try:
            async with task.lock:
                if task.view.terminal:  # answered while an earlier change was being made durable
                    return
                await self.record_held(
                    task,
                    state=TaskState.FAILED,
                    reason=Reason.DEADLINE_PASSED,
                    answer=self.answer(task, State.EXPIRED, Reason.DEADLINE_PASSED),
                    extra=[obligation_record(first, task_id, "closed", "deadline_passed")],
                )
        except JournalError:
            log.exception("could not journal the deadline of task %s", task_id)

    async def keep(self, view: TaskView, msg: Message, sender: Sender) -> str:
        """Journal a task that is settled on arrival (its message holds no dispatch), then apply it."""
        rec = task_record(view, msg.message_id, sender, entry_ref="user", text=msg.text, meta=meta_of(msg))
        await self.receiver.record([rec])
        self.table.apply(rec)
        return view.task_id
