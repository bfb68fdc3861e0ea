"""The task service: A2A-style tasks over the one receiver chain, kept in the agent's journal.

A new message from a verified sender becomes a task: checked (hop, policy, admission), journaled as submitted with
its task record, then dispatched in order by one worker. Until the worker claims it, its creator may cancel it;
from the claim on it is not cancelable, and the claim happens in the same event-loop step as the dequeue, so a
cancel in the dequeue-to-write window either wins with zero harness writes or loses with exactly one.

An ask's task stays working after delivery until the receiving session replies (completed, the reply as the final
message) or its deadline passes (failed). The receiving side may also mark any task as awaiting its answer
(`expect_answer`, before the dispatch settles), answer with artifacts or a direct message, or ask the creator for
input (input_required: the creator's next message on the task resumes it). Everything is rebuilt from the journal on
start: open tasks are resumed (re-checked, then dispatched), claimed-but-unsettled ones stay working with delivery
unknown, deadlines re-armed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from typing import Any

from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import Outcome, State
from crosstalk.journal import JournalError
from crosstalk.journal import records as R
from crosstalk.policy import Load
from crosstalk.receiver import Inbound, Receiver
from crosstalk.tasks.model import (
    Artifact,
    HistoryEntry,
    TaskApi,
    TaskError,
    TaskPage,
    TaskState,
    TaskView,
)
from crosstalk.tasks.table import TaskEntry, TaskTable, meta_of, obligation_record, page_of, task_record

log = logging.getLogger(__name__)

# The longest a default-wait SendMessage blocks (an ask with no deadline, a stalled session): under the clients'
# usual 60 s request timeout, so the sender gets the task (still working) rather than a timeout.
MAX_WAIT_S = 50.0
POLICY_PREFIXES = ("acl:", "kind:")  # refusals that fail a task; other refusals (limits, hops) create none


class ReplyError(TaskError):
    """reply() refused: NO_SUCH_MESSAGE, NOT_AN_ASK, ALREADY_REPLIED or ASK_CLOSED."""

    NO_SUCH_MESSAGE = "no_such_message"
    NOT_AN_ASK = "not_an_ask"
    ALREADY_REPLIED = "already_replied"
    ASK_CLOSED = "ask_closed"


class TaskService(TaskApi):
    def __init__(self, receiver: Receiver, *, max_wait_s: float = MAX_WAIT_S) -> None:
        self.receiver = receiver
        self.state = receiver.state
        self.max_wait_s = max_wait_s
        self.table = TaskTable(self._text_of)
        self._queue: asyncio.Queue[tuple[str, Inbound]] = asyncio.Queue()
        self._settled: dict[str, asyncio.Event] = {}  # message id → set once its dispatch outcome is known
        self._worker: asyncio.Task[None] | None = None
        self._inflight: dict[tuple[str, str], asyncio.Future[str]] = {}

    # ------------------------------------------------------------------ lifecycle
    def load(self, records: list[dict[str, Any]]) -> None:
        """Rebuild tasks from the journal's task records (call before start)."""
        for rec in records:
            if rec.get("type") == R.TASK:
                self.table.apply(rec)

    async def start(self) -> None:
        """Start the dispatch worker, re-arm deadlines and resume the tasks a restart interrupted."""
        self._worker = asyncio.create_task(self._work(), name="task-dispatch")
        now = time.time()
        for task in self.table.tasks.values():
            if task.view.terminal:
                continue
            if task.view.deadline_at is not None:
                self._arm_deadline(task, max(0.0, task.view.deadline_at - now))
            first = task.messages[0] if task.messages else None
            entry = self.state.messages.get(first) if first else None
            if entry is None:
                continue
            if entry.state is State.SUBMITTED and task.view.state is TaskState.SUBMITTED:
                await self._resume(task, entry)
            elif entry.state in (State.DISPATCHING, State.UNKNOWN) and task.view.state is TaskState.SUBMITTED:
                await self._record(
                    task, state=TaskState.WORKING, delivery=State.UNKNOWN.value, reason="restarted_during_dispatch"
                )

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker
            self._worker = None
        for task in self.table.tasks.values():
            if task.deadline is not None:
                task.deadline.cancel()

    def prune(self, keep_ids: set[str], cutoff: float) -> int:
        """Forget terminal tasks that retention dropped from the journal (older than `cutoff`, not kept)."""
        return self.table.prune(keep_ids, cutoff)

    def _text_of(self, message_id: str) -> str:
        stored = self.state.messages.get(message_id)
        return "\n".join(p.get("text", "") for p in (stored.message.get("parts", []) if stored else []))

    # ------------------------------------------------------------------ TaskApi
    async def send(
        self, sender: Sender, message: Message, *, task_id: str | None, return_immediately: bool
    ) -> TaskView:
        if not sender.agent_id:
            raise TaskError(TaskError.INVALID, "tasks need a verified sender")
        key = (sender.dedupe_key, message.message_id)
        running = self._inflight.get(key)
        if running is not None:
            tid = await asyncio.shield(running)
            return await self._answer(tid, message.message_id, return_immediately)
        prior = self.state.lookup_dedupe(*key)
        if prior is not None and prior.message.get("task_id") in self.table.tasks:
            return await self._answer(prior.message["task_id"], message.message_id, return_immediately)
        if message.message_id in self.state.messages:
            raise TaskError(TaskError.INVALID, "message_id_in_use: another sender already used this message id")
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        waiting = not return_immediately
        if waiting:
            self.receiver.begin_default_wait()
        try:
            tid = await (
                self._continue(sender, message, task_id) if task_id else self._create(sender, message, waiting)
            )
            fut.set_result(tid)
        except BaseException:
            fut.cancel()  # a concurrent duplicate sees the same failure
            if waiting:
                self.receiver.end_default_wait()
            raise
        finally:
            self._inflight.pop(key, None)
        try:
            return await self._answer(tid, message.message_id, return_immediately)
        finally:
            if waiting:
                self.receiver.end_default_wait()  # counted until answered: the wait is what the limit bounds

    async def get(self, sender_agent_id: str, task_id: str) -> TaskView:
        return self.table.own(sender_agent_id, task_id).view

    async def list(
        self,
        sender_agent_id: str,
        *,
        page_size: int = 50,
        page_token: str = "",
        context_id: str | None = None,
        state: TaskState | None = None,
        updated_after: float | None = None,
    ) -> TaskPage:
        return page_of(
            (t.view for t in self.table.tasks.values()),
            sender_agent_id,
            page_size=page_size,
            page_token=page_token,
            context_id=context_id,
            state=state,
            updated_after=updated_after,
        )

    async def cancel(self, sender_agent_id: str, task_id: str) -> TaskView:
        task = self.table.own(sender_agent_id, task_id)
        if task.view.state is TaskState.INPUT_REQUIRED:
            # Waiting for its creator: nothing is queued or in flight, so canceling writes nothing to the session.
            extra = [obligation_record(task.messages[0], task_id, "closed", "canceled")] if self._is_ask(task) else []
            await self._record(task, state=TaskState.CANCELED, reason="canceled_by_creator", extra=extra)
            return task.view
        if task.view.terminal or task.claimed or task.view.state is not TaskState.SUBMITTED:
            raise TaskError(
                TaskError.NOT_CANCELABLE,
                f"task {task_id} is {task.view.state.value} and already dispatched or finished; it cannot be canceled",
            )
        task.claimed = True  # in this same step: the worker now skips it
        try:
            await self._record(task, state=TaskState.CANCELED, reason="canceled_by_creator")
        except JournalError:
            task.claimed = False
            raise
        for mid in task.messages:
            entry = self.state.messages.get(mid)
            if entry is not None and entry.state is State.SUBMITTED:
                await self.receiver.record([R.outcome(mid, State.REJECTED, "canceled", self.receiver.identity.binding)])
        return task.view

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
        extra = (
            [obligation_record(task.messages[0], task.view.task_id, "closed", "replied")] if self._is_ask(task) else []
        )
        await self._record(
            task,
            state=TaskState.COMPLETED,
            reason=None,
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
        if task.view.terminal:
            raise ReplyError(ReplyError.ASK_CLOSED, f"the task is {task.view.state.value} ({task.view.reason})")
        if task.view.state is TaskState.INPUT_REQUIRED:
            return task.view
        entry = HistoryEntry(new_message_id(), "agent", text) if text else None
        await self._record(task, state=TaskState.INPUT_REQUIRED, reason=None, entry=entry)
        return task.view

    def _answerable_task(self, message_id: str) -> TaskEntry:
        task = self.table.holding(message_id)
        if task is None:
            raise ReplyError(ReplyError.NO_SUCH_MESSAGE, f"no task holds message {message_id}")
        if not self._is_ask(task) and not task.awaiting:
            raise ReplyError(ReplyError.NOT_AN_ASK, f"message {message_id} is a {task.view.kind}, not an ask")
        return task

    @staticmethod
    def _is_ask(task: TaskEntry) -> bool:
        return task.view.kind == Kind.ASK.value

    # ------------------------------------------------------------------ internals: creating
    async def _create(self, sender: Sender, message: Message, waiting: bool) -> str:
        tid = new_message_id()
        msg = message.with_(task_id=tid, context_id=message.context_id or new_message_id())
        inbound = Inbound(msg, sender, "a2a", new_task=True, default_wait=waiting)
        reason, _bucket = self.receiver.check(inbound)
        now = time.time()
        deadline_at = now + msg.deadline_seconds if msg.kind is Kind.ASK and msg.deadline_seconds else None
        view = TaskView(
            task_id=tid,
            context_id=msg.context_id or tid,
            creator=sender.agent_id or "",
            kind=msg.kind.value,
            state=TaskState.SUBMITTED,
            created_at=now,
            updated_at=now,
            deadline_at=deadline_at,
            history=(HistoryEntry(msg.message_id, "user", msg.text, meta_of(msg)),),
        )
        if reason is not None:
            self.receiver.reject(inbound, reason)
            if not reason.startswith(POLICY_PREFIXES):
                raise TaskError(TaskError.INVALID, f"rejected: {reason}")
            # A policy refusal is an answer the creator can look up: a failed task, the message never injected.
            failed = replace(view, state=TaskState.FAILED, reason=reason, delivery=State.REJECTED.value)
            rec = task_record(failed, msg.message_id, sender, entry_ref="user", text=msg.text, meta=meta_of(msg))
            await self.receiver.record([rec])
            self.table.apply(rec)
            return tid
        rec = task_record(view, msg.message_id, sender, entry_ref="user", meta=meta_of(msg))
        await self._accept(inbound, rec)
        task = self.table.apply(rec)
        if deadline_at is not None:
            self._arm_deadline(task, msg.deadline_seconds)
        self._enqueue(tid, inbound)
        return tid

    async def _continue(self, sender: Sender, message: Message, task_id: str) -> str:
        task = self.table.own(sender.agent_id or "", task_id)
        if task.view.terminal:
            raise TaskError(
                TaskError.UNSUPPORTED, f"task {task_id} is {task.view.state.value}; start a new task instead"
            )
        if message.context_id and message.context_id != task.view.context_id:
            # A2A 1.0 §3.4.3: a message whose contextId differs from its task's must be rejected.
            raise TaskError(
                TaskError.INVALID_PARAMS, f"contextId {message.context_id!r} is not task {task_id}'s context"
            )
        msg = message.with_(task_id=task_id, context_id=task.view.context_id)
        inbound = Inbound(msg, sender, "a2a")
        reason, _ = self.receiver.check(inbound)
        if reason is not None:
            # Continuations are checked again; a refused one is not injected and leaves the task as it was.
            self.receiver.reject(inbound, reason)
            raise TaskError(TaskError.INVALID, f"rejected: {reason}")
        resumes = task.view.state is TaskState.INPUT_REQUIRED  # the input the receiver asked for: working again
        view = replace(task.view, state=TaskState.WORKING) if resumes else task.view
        rec = task_record(view, msg.message_id, sender, entry_ref="user", meta=meta_of(msg))
        await self._accept(inbound, rec)
        if resumes:
            task.input_turn, task.awaiting = msg.message_id, False
        self.table.apply(rec)
        self._enqueue(task_id, inbound)
        return task_id

    async def _resume(self, task: TaskEntry, entry: Any) -> None:
        """A task journaled before a restart and never claimed: check it again, then dispatch it."""
        try:
            msg = Message.from_dict(entry.message, check_size=False)
            sender = Sender.from_dict(entry.sender)
        except (ValueError, KeyError):
            await self._record(task, state=TaskState.FAILED, reason="unreadable_record", delivery=State.REJECTED.value)
            return
        inbound = Inbound(msg, sender, "a2a")
        reason, _ = self.receiver.check(inbound, load=Load())  # admitted before the restart: never evicted by load
        if reason is not None:
            await self.receiver.record(
                [R.outcome(msg.message_id, State.REJECTED, reason, self.receiver.identity.binding, reconciled=True)]
            )
            await self._record(task, state=TaskState.FAILED, reason=reason, delivery=State.REJECTED.value)
            return
        self._enqueue(task.view.task_id, inbound)

    async def _accept(self, inbound: Inbound, rec: dict[str, Any]) -> None:
        """Journal the message with its task record (the receiver chain's accept). A failed write accepted nothing."""
        try:
            await self.receiver.accept(inbound, [rec])
        except (JournalError, OSError, TimeoutError) as exc:
            raise TaskError(TaskError.INTERNAL, f"not accepted: the journal write failed ({exc})") from None

    def _enqueue(self, task_id: str, inbound: Inbound) -> None:
        """Queue a message for the dispatch worker; its settled event is set once the dispatch outcome is known."""
        self._settled[inbound.message.message_id] = asyncio.Event()
        self._queue.put_nowait((task_id, inbound))

    # ------------------------------------------------------------------ internals: dispatching
    async def _work(self) -> None:
        while True:
            tid, inbound = await self._queue.get()
            task = self.table.get(tid)
            mid = inbound.message.message_id
            first = bool(task and task.messages and task.messages[0] == mid)
            if task is None or (first and (task.claimed or task.view.state is not TaskState.SUBMITTED)):
                self._settle_event(mid)
                continue  # canceled (or settled) while queued: nothing is written to the session
            if first:
                # Same event-loop step as the dequeue: a cancel from now on is refused. Working from here; the
                # journal's dispatch record says the same, so a restart reads it back as working (unknown).
                task.claimed = True
                task.view = replace(task.view, state=TaskState.WORKING, updated_at=time.time())
            try:
                outcome = await self.receiver.dispatch(inbound)
                await self._after_dispatch(task, inbound, outcome, first)
            except Exception:
                log.exception("dispatch of task %s failed", tid)
            finally:
                self._settle_event(mid)

    async def _after_dispatch(self, task: TaskEntry, inbound: Inbound, outcome: Outcome, first: bool) -> None:
        delivered = outcome.state in (State.ACCEPTED, State.QUEUED)
        if task.view.terminal or task.view.state is TaskState.INPUT_REQUIRED:
            # The session answered (or asked for input) before the harness call returned: that already settled it.
            task.changed.set()
            return
        if not first and inbound.message.message_id != task.input_turn:
            task.changed.set()
            return
        if delivered and self._is_ask(task):
            opened = [obligation_record(inbound.message.message_id, task.view.task_id, "open", None)] if first else []
            await self._record(task, state=TaskState.WORKING, delivery=outcome.state.value, reason=None, extra=opened)
        elif delivered and task.awaiting:
            await self._record(task, state=TaskState.WORKING, delivery=outcome.state.value, reason=None)
        elif delivered:
            await self._record(task, state=TaskState.COMPLETED, delivery=outcome.state.value, reason=None)
        elif outcome.state is State.UNKNOWN:
            # Maybe delivered, maybe not: never completed, never failed, never resent.
            await self._record(task, state=TaskState.WORKING, delivery=outcome.state.value, reason=outcome.reason)
        else:
            await self._record(task, state=TaskState.FAILED, delivery=outcome.state.value, reason=outcome.reason)

    def _settle_event(self, message_id: str) -> None:
        event = self._settled.pop(message_id, None)
        if event is not None:
            event.set()

    # ------------------------------------------------------------------ internals: waiting and answering
    async def _answer(self, tid: str, message_id: str, return_immediately: bool) -> TaskView:
        task = self.table.tasks[tid]
        if return_immediately:
            return task.view
        deadline = time.monotonic() + self.max_wait_s
        if task.view.deadline_at is not None:
            deadline = min(deadline, time.monotonic() + max(0.0, task.view.deadline_at - time.time()) + 1.0)
        while not self._answerable(task, message_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            event = task.changed
            settled = self._settled.get(message_id)
            waiters = [asyncio.ensure_future(event.wait())]
            if settled is not None:
                waiters.append(asyncio.ensure_future(settled.wait()))
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
        return task.view

    def _answerable(self, task: TaskEntry, message_id: str) -> bool:
        view = task.view
        if view.terminal or view.state is TaskState.INPUT_REQUIRED:
            return True  # terminal or interrupted: the creator has something to act on
        first = message_id == (task.messages[0] if task.messages else None)
        if not first and message_id != task.input_turn:
            return message_id not in self._settled  # a continuation: once its dispatch is settled
        if not first and message_id in self._settled:
            return False  # the input the receiver asked for: settled by its own dispatch, like a first message
        if self._is_ask(task) or task.awaiting:
            return view.delivery == State.UNKNOWN.value  # waits for its reply (or deadline)
        return view.delivery is not None  # delivered, failed, or unknown: the dispatch is over

    # ------------------------------------------------------------------ internals: records
    async def _record(
        self,
        task: TaskEntry,
        *,
        state: TaskState,
        reason: str | None = None,
        delivery: str | None = None,
        entry: HistoryEntry | None = None,
        artifacts: tuple[Artifact, ...] = (),
        direct: bool = False,
        extra: list[dict[str, Any]] | None = None,
    ) -> None:
        view = replace(
            task.view, state=state, reason=reason, delivery=delivery or task.view.delivery, updated_at=time.time()
        )
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

    def _arm_deadline(self, task: TaskEntry, delay: float) -> None:
        loop = asyncio.get_running_loop()
        task.deadline = loop.call_later(delay, lambda: asyncio.ensure_future(self._expire(task.view.task_id)))

    async def _expire(self, task_id: str) -> None:
        task = self.table.get(task_id)
        if task is None or task.view.terminal:
            return
        first = task.messages[0] if task.messages else task_id
        try:
            await self._record(
                task,
                state=TaskState.FAILED,
                reason="deadline_passed",
                extra=[obligation_record(first, task_id, "closed", "deadline_passed")],
            )
        except JournalError:
            log.exception("could not journal the deadline of task %s", task_id)


__all__ = ["ReplyError", "TaskService"]
