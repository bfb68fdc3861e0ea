"""The task service: A2A-style tasks over the one receiver chain, kept in the agent's journal.

A new message from a verified sender becomes a task: checked (hop, policy, admission), journaled as submitted with
its task record, then dispatched in order by one worker (tasks/worker.py). Until the worker claims it, its creator
may cancel it; from the claim on it is not cancelable, and the claim happens in the same event-loop step as the
dequeue, so a cancel in the dequeue-to-write window either wins with zero harness writes or loses with exactly one.
The same holds for a task waiting for its creator's input: cancelable unless one of its messages is being written
to the session; its continuations still queued are withdrawn, never written.
When its creator waits for the outcome and nothing is queued or dispatching, the claim is journaled with the task
itself, and the worker takes nothing else until that task is queued: a journaled claim is the message being written.

An ask's task stays working after delivery until the receiving session replies (completed, the reply as the final
message) or its deadline passes (failed). The receiving side may also mark any task as awaiting its answer
(`expect_answer`, before the dispatch settles), answer with artifacts or a direct message, or ask the creator for
input (input_required: the creator's next message on the task resumes it). Everything is rebuilt from the journal on
start (tasks/restart.py): every task message journaled but never written, a first message or a continuation, is
re-checked and dispatched again in journal order, or withdrawn; claimed-but-unsettled ones stay working with delivery
unknown; deadlines re-armed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from crosstalk.core.errors import TaskError
from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import Outcome, Reason, State
from crosstalk.core.tasks import (
    Artifact,
    HistoryEntry,
    TaskApi,
    TaskPage,
    TaskState,
    TaskView,
)
from crosstalk.fs import trace
from crosstalk.journal import MessageEntry
from crosstalk.journal import records as R
from crosstalk.receiver import Inbound, Receiver
from crosstalk.tasks.ledger import TaskLedger, is_ask
from crosstalk.tasks.owners import task_owner, via
from crosstalk.tasks.restart import inbound_of, resume
from crosstalk.tasks.table import TaskEntry, TaskTable, meta_of, page_of, task_record
from crosstalk.tasks.worker import DispatchWorker

log = logging.getLogger(__name__)

# The longest a default-wait SendMessage blocks (an ask with no deadline, a stalled session): under the clients'
# usual 60 s request timeout, so the sender gets the task (still working) rather than a timeout.
MAX_WAIT_S = 50.0
POLICY_PREFIXES = ("acl:", "kind:")  # refusals that fail a task; other refusals (limits, hops) create none


class TaskService(TaskApi):
    def __init__(self, receiver: Receiver, *, max_wait_s: float = MAX_WAIT_S) -> None:
        self.receiver = receiver
        self.state = receiver.state
        self.max_wait_s = max_wait_s
        self.table = TaskTable(self._text_of)
        self.ledger = TaskLedger(receiver, self.table)
        self.worker = DispatchWorker(receiver, self.table, self.ledger)
        self._late_moves: set[asyncio.Task[None]] = set()
        receiver.add_late_listener(self._late)

    # ------------------------------------------------------------------ lifecycle
    def load(self, records: list[dict[str, Any]]) -> None:
        """Rebuild tasks from the journal's task records (call before start)."""
        for rec in records:
            if rec.get("type") == R.TASK:
                self.table.apply(rec)

    async def start(self) -> None:
        """Re-arm deadlines, settle or queue again what a restart interrupted (tasks/restart.py), then start the
        dispatch worker, those messages first."""
        self.worker.start(await resume(self.receiver, self.table, self.ledger, self.worker))

    async def close(self) -> None:
        await self.worker.close()
        for task in self.table.tasks.values():
            if task.deadline is not None:
                task.deadline.cancel()

    def _late(self, entry: MessageEntry, outcome: Outcome) -> None:
        """The harness's later word on a message (receiver late listener): move the task that holds it."""
        task = self.table.holding(entry.message_id)
        if task is None:
            return
        move = asyncio.get_running_loop().create_task(self._move_late(task, entry.message_id, outcome))
        self._late_moves.add(move)
        move.add_done_callback(self._late_moves.discard)

    async def _move_late(self, task: TaskEntry, message_id: str, outcome: Outcome) -> None:
        try:
            await self.worker.late(task, message_id, outcome)
        except Exception:
            log.exception("moving task %s on a later word failed", task.view.task_id)

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
        """The A2A edge's SendMessage: the message runs the receiver chain (journaled with its task record, not yet
        dispatched), then the task is built on the chain's answer and the worker dispatches it in order."""
        if not task_owner(sender):
            raise TaskError(TaskError.INVALID, "tasks need a verified sender")
        waiting = not return_immediately
        tid = await (self._continue(sender, message, task_id) if task_id else self._create(sender, message, waiting))
        if waiting:
            self.receiver.begin_default_wait()  # counted until answered: the wait is what the limit bounds
        try:
            if waiting and self.worker.pending(message.message_id) is not None:
                # The worker, woken for it before this step, goes first: it reaches the harness before this
                # answer's waiters are set up (and the dispatch may be over by then, so none are needed).
                await asyncio.sleep(0)
            return await self._answer(tid, message.message_id, return_immediately)
        finally:
            if waiting:
                self.receiver.end_default_wait()

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
        await self.ledger.cancel(task)
        for mid in task.messages:  # journaled, still queued (the first, or a continuation): settled, never written
            entry = self.state.messages.get(mid)
            if entry is not None and entry.state is State.SUBMITTED:
                await self.worker.withdraw(inbound_of(entry), "canceled")
        return task.view

    # ------------------------------------------------------------------ the receiving side (tasks/ledger.py)
    def expect_answer(self, message_id: str) -> bool:
        return self.ledger.expect_answer(message_id)

    async def reply(
        self, message_id: str, text: str, *, artifacts: tuple[Artifact, ...] = (), direct: bool = False
    ) -> TaskView:
        return await self.ledger.reply(message_id, text, artifacts=artifacts, direct=direct)

    async def require_input(self, message_id: str, text: str) -> TaskView:
        return await self.ledger.require_input(message_id, text)

    # ------------------------------------------------------------------ internals: creating
    async def _create(self, sender: Sender, message: Message, waiting: bool) -> str:
        tid = new_message_id()
        msg = message.with_(task_id=tid, context_id=message.context_id or new_message_id())
        now = time.time()
        deadline_at = now + msg.deadline_seconds if msg.kind is Kind.ASK and msg.deadline_seconds else None
        view = TaskView(
            task_id=tid,
            context_id=msg.context_id or tid,
            creator=task_owner(sender),
            kind=msg.kind.value,
            state=TaskState.SUBMITTED,
            created_at=now,
            updated_at=now,
            deadline_at=deadline_at,
            history=(HistoryEntry(msg.message_id, "user", msg.text, meta_of(msg)),),
            answer=Outcome(msg.message_id, State.SUBMITTED, task_id=tid),
        )
        rec = task_record(view, msg.message_id, sender, entry_ref="user", meta=meta_of(msg))
        inbound = Inbound(msg, sender, via(sender), new_task=True, default_wait=waiting)
        # A creator waiting for the outcome, and nothing queued or dispatching: the worker would claim this task in
        # its next step, so the claim is journaled with it (one durable write before the harness, not two), and the
        # worker takes nothing else until it is queued (`reserve`). One answered at once (return_immediately) stays
        # submitted, cancelable, until the worker claims it.
        claim = waiting and self.worker.reserve()
        held = claim  # the reservation is still open
        try:
            outcome = await self.receiver.receive(inbound, records=[rec], defer=True, claim=claim)
            if outcome.state is State.SUBMITTED:
                trace.mark("journaled")  # received, the task and (idle) the claim, durable: the chain's checks passed
                # Applied in the same event-loop step as the chain's answer: a duplicate woken by it finds the task.
                task = self.table.apply(rec)
                if claim:
                    task.claimed = True
                    task.view = replace(task.view, state=TaskState.WORKING, updated_at=time.time())
                if deadline_at is not None:
                    self.ledger.arm_deadline(task, msg.deadline_seconds)
                self.worker.enqueue(tid, inbound, claimed=claim)
                held = False
        finally:
            if held:
                self.worker.release()
        if outcome.state is not State.SUBMITTED:
            return await self._not_submitted(outcome, view, msg, sender)
        return tid

    async def _not_submitted(self, outcome: Outcome, view: TaskView, msg: Message, sender: Sender) -> str:
        """A new task's message the chain did not journal as submitted: a duplicate (its task's id), a policy
        refusal (a failed task the creator can look up), a ping (answered, never kept), or an error."""
        existing = self._duplicate_task(outcome)
        if existing is not None:
            return existing
        if outcome.state is State.ACCEPTED and outcome.evidence.get("ping"):
            # Liveness: the chain answered it without the session; the task records that answer.
            answer = outcome.with_(task_id=view.task_id)
            done = replace(view, state=TaskState.COMPLETED, reason=Reason.PONG, delivery=State.ACCEPTED.value,
                           answer=answer)  # fmt: skip
            return await self.ledger.keep(done, msg, sender)
        if outcome.state is not State.REJECTED:
            raise TaskError(TaskError.INTERNAL, f"not accepted: {_why_not(outcome)}")
        reason = outcome.reason or ""
        if reason == "message_id_in_use":
            raise TaskError(TaskError.INVALID, "message_id_in_use: another sender already used this message id")
        if not reason.startswith(POLICY_PREFIXES):
            raise TaskError(TaskError.INVALID, f"rejected: {reason}")
        # A policy refusal is an answer the creator can look up: a failed task, the message never injected.
        answer = outcome.with_(task_id=view.task_id)
        failed = replace(view, state=TaskState.FAILED, reason=reason, delivery=State.REJECTED.value, answer=answer)
        return await self.ledger.keep(failed, msg, sender)

    def _duplicate_task(self, outcome: Outcome) -> str | None:
        """The task of a message the chain answered as a duplicate; TaskError when that message holds no task
        (the same sender used the id outside a task)."""
        if not outcome.evidence.get("duplicate"):
            return None
        entry = self.state.messages.get(outcome.message_id)
        tid = entry.message.get("task_id") if entry is not None else None
        if tid in self.table.tasks:
            return tid
        raise TaskError(TaskError.INVALID, "message_id_in_use: this message id was already used outside a task")

    async def _continue(self, sender: Sender, message: Message, task_id: str) -> str:
        task = self.table.own(task_owner(sender), task_id)
        async with task.lock:  # its record is built from, and applied to, the task as the change before it left it
            return await self._continue_held(task, sender, message)

    async def _continue_held(self, task: TaskEntry, sender: Sender, message: Message) -> str:
        task_id = task.view.task_id
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
        resumes = task.view.state is TaskState.INPUT_REQUIRED  # the input the receiver asked for: working again
        view = replace(task.view, state=TaskState.WORKING) if resumes else task.view
        rec = task_record(view, msg.message_id, sender, entry_ref="user", meta=meta_of(msg))
        inbound = Inbound(msg, sender, via(sender))
        outcome = await self.receiver.receive(inbound, records=[rec], defer=True)
        if outcome.state is not State.SUBMITTED:
            existing = self._duplicate_task(outcome)
            if existing is not None:
                return existing
            # Continuations are checked again; a refused one is not injected and leaves the task as it was.
            if outcome.state is State.REJECTED:
                raise TaskError(TaskError.INVALID, f"rejected: {outcome.reason}")
            if outcome.state is State.ACCEPTED:  # a ping on the task: answered by the chain, the task unchanged
                return task_id
            raise TaskError(TaskError.INTERNAL, f"not accepted: {_why_not(outcome)}")
        if resumes:
            task.awaiting = False
        self.table.apply(rec)  # resumed: the input is its turn (table.apply)
        self.worker.enqueue(task_id, inbound)
        return task_id

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
            settled = self.worker.pending(message_id)
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
            return self.worker.pending(message_id) is None  # a continuation: once its dispatch is settled
        if not first and self.worker.pending(message_id) is not None:
            return False  # the input the receiver asked for: settled by its own dispatch, like a first message
        if is_ask(task) or task.awaiting:
            return view.delivery == State.UNKNOWN.value  # waits for its reply (or deadline)
        return view.delivery is not None  # delivered, failed, or unknown: the dispatch is over


def _why_not(outcome: Outcome) -> str:
    if outcome.reason == "journal_write_failed":
        return "the journal write failed"
    return f"{outcome.state.value} ({outcome.reason})"


__all__ = ["TaskService"]
