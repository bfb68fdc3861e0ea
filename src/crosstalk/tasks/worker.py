"""The task service's one dispatch worker: journaled task messages, dispatched in order.

A message the chain journaled as submitted (`receive(defer=True)`) is queued here. The worker claims a task's first
message in the same event-loop step as its dequeue (so a cancel either wins before it, with zero harness writes, or
is refused after it), runs the chain's deferred half (`Receiver.dispatch`: claim, inject, outcome), then moves the
task on from the outcome: an ask stays working until its reply, an inform completes, a failure fails it, and an
unknown delivery stays working (maybe delivered, never resent). Each queued message has a settled event, set once its
dispatch outcome is known, that a waiting sender watches.

A message the worker does not write (its task was canceled, or ended before its first message was written) is settled
as rejected, never left journaled and open. A new task journaled with its dispatch claim (`reserve`) is the next
message written: the worker takes nothing else until it is queued, so a claim in the journal is always the message
being written, and a restart reads it back as unknown only if it may have reached the session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from crosstalk.core.states import Outcome, Reason, State
from crosstalk.core.tasks import TaskState
from crosstalk.fs import trace
from crosstalk.receiver import Inbound, Receiver
from crosstalk.tasks.ledger import TaskLedger, is_ask
from crosstalk.tasks.table import TaskEntry, TaskTable, obligation_record

log = logging.getLogger(__name__)

Queued = tuple[str, Inbound, bool]  # (task, message, its claim journaled with it)
CLOSE_TIMEOUT_S = 10.0  # a cancelled dispatch gives up its harness call at once; more is a bug, logged


class DispatchWorker:
    def __init__(self, receiver: Receiver, table: TaskTable, ledger: TaskLedger) -> None:
        self.receiver = receiver
        self.table = table
        self.ledger = ledger
        self._queue: deque[Queued] = deque()
        self._wake = asyncio.Event()  # set when the queue or the reservation changes
        self._reserved = False  # a new task is being journaled with its claim: it goes next, nothing else until then
        self._settled: dict[str, asyncio.Event] = {}  # message id → set once its dispatch outcome is known
        self._withdrawing: set[str] = set()  # messages whose rejection is being journaled
        self._task: asyncio.Task[None] | None = None
        self._running = False  # dispatching a message now

    def start(self, resumed: Iterable[tuple[str, Inbound]] = ()) -> None:
        """Start dispatching; `resumed` (a restart's messages, in journal order) go ahead of anything queued before
        the start (accepted while the agent was starting), so each task's messages are written in order."""
        early = list(self._queue)
        self._queue.clear()
        for task_id, inbound in resumed:
            self.enqueue(task_id, inbound)
        self._queue.extend(early)
        self._task = asyncio.create_task(self._work(), name="task-dispatch")

    async def close(self) -> None:
        """Cancel the worker and wait for it, bounded (asyncio.wait: the worker's end is not the caller's, so a
        cancel of the caller itself still reaches the caller)."""
        if self._task is not None:
            self._task.cancel()
            _done, pending = await asyncio.wait({self._task}, timeout=CLOSE_TIMEOUT_S)
            if pending:
                log.error("the dispatch worker did not end within %g s of its cancel", CLOSE_TIMEOUT_S)
            self._task = None

    @property
    def idle(self) -> bool:
        """Started, and nothing queued, reserved or dispatching: a message queued now is dispatched next."""
        return self._task is not None and not (self._running or self._reserved or self._queue)

    def reserve(self) -> bool:
        """Hold the next write for a message about to be journaled with its dispatch claim, when the worker is idle
        (True). Until it is queued (`enqueue(claimed=True)`) or `release`d, the worker takes nothing else: what
        is queued meanwhile waits behind it, so the claim stays true (this message is the next one written)."""
        if not self.idle:
            return False
        self._reserved = True
        return True

    def release(self) -> None:
        """The reserved message will not come (refused, a duplicate, or its journal write failed)."""
        self._reserved = False
        self._wake.set()

    def enqueue(self, task_id: str, inbound: Inbound, *, claimed: bool = False) -> None:
        """Queue a message; its settled event is set once the dispatch outcome is known. `claimed`: its dispatch
        claim was journaled with it (the worker writes none); it fills the reservation, ahead of the queue."""
        self._settled[inbound.message.message_id] = asyncio.Event()
        if claimed:
            assert self._reserved, "a claimed message without a reservation"
            self._reserved = False
            self._queue.appendleft((task_id, inbound, claimed))
        else:
            self._queue.append((task_id, inbound, claimed))
        self._wake.set()

    def pending(self, message_id: str) -> asyncio.Event | None:
        """The settled event of a message still queued or dispatching; None once its outcome is known."""
        return self._settled.get(message_id)

    async def withdraw(self, inbound: Inbound, reason: str, *, reconciled: bool = False) -> None:
        """Settle a journaled, never-written message as rejected (`Receiver.withdraw`), once: not if it is settled
        already or its rejection is being journaled (a cancel and the worker may both come to it). Raises
        JournalError."""
        mid = inbound.message.message_id
        entry = self.receiver.state.messages.get(mid)
        if entry is None or entry.state is not State.SUBMITTED or mid in self._withdrawing:
            return
        self._withdrawing.add(mid)
        try:
            await self.receiver.withdraw(inbound, reason, reconciled=reconciled)
        finally:
            self._withdrawing.discard(mid)

    async def _next(self) -> Queued:
        """The next message to take: none while a reservation is open (its message goes first)."""
        while self._reserved or not self._queue:
            self._wake.clear()
            await self._wake.wait()  # idle until a message comes: the worker's life, ended by close()
        return self._queue.popleft()

    async def _work(self) -> None:
        me = asyncio.current_task()
        while True:
            if me is not None and me.cancelling():
                # Asked to end while a dispatch ran, and the request was lost on the way (Python 3.11's wait_for
                # returns a result that came in with the cancel, dropping it): end now, not at the next message.
                raise asyncio.CancelledError
            tid, inbound, claimed = await self._next()
            mid = inbound.message.message_id
            self._running = True
            try:
                task = await self._take(tid, inbound, claimed)
                if task is None:
                    continue  # not to be written (withdrawn), or settled while queued
                try:
                    outcome = await self.receiver.dispatch(inbound, claimed=claimed)
                finally:
                    task.sending = None  # the harness call is over: a cancel may apply again
                await self._after_dispatch(task, inbound, outcome)
                trace.mark("task_recorded")
            except Exception:
                log.exception("dispatch of task %s failed", tid)
            finally:
                self._running = False
                self._settle(mid)

    async def _take(self, tid: str, inbound: Inbound, claimed: bool) -> TaskEntry | None:
        """The task of a message just taken from the queue, the message marked as being written (`sending`, and a
        first message claimed) in the same event-loop step as the decision, so a cancel either wins before it, with
        zero harness writes, or is refused after it. None: nothing is to be written (its task is gone, canceled, or
        ended before its first message was written: the message is withdrawn; or it was claimed while queued)."""
        mid = inbound.message.message_id
        task = self.table.get(tid)
        if task is not None and task.canceling:
            async with task.lock:  # a cancel being made durable (bounded by its journal write): its end decides
                pass
        why = self.unwritten(task, mid, claimed=claimed)
        if why is not None:
            await self.withdraw(inbound, why)
            return None
        assert task is not None
        if task.messages and task.messages[0] == mid and not claimed:
            if task.claimed:
                return None  # claimed while queued (never here: the one claim is this step's)
            # Working from here; the journal's dispatch record says the same, so a restart reads it back as working
            # (unknown).
            task.claimed = True
            task.view = replace(task.view, state=TaskState.WORKING, updated_at=time.time())
        task.sending = mid
        return task

    async def _after_dispatch(self, task: TaskEntry, inbound: Inbound, outcome: Outcome) -> None:
        # Decided under the task's lock, after any change under way (the session's answer may be durable but not yet
        # applied): a move built from the state before that answer would overwrite it.
        async with task.lock:
            if not _moves(task, inbound.message.message_id):
                task.changed.set()
                return
            await self.move(task, inbound.message.message_id, outcome, task.input_turn is None)

    async def late(self, task: TaskEntry, message_id: str, outcome: Outcome) -> None:
        """The harness's later word on a task's message it held: the task moves as it would have at dispatch."""
        async with task.lock:
            if _moves(task, message_id):
                await self.move(task, message_id, outcome, task.input_turn is None)

    async def move(self, task: TaskEntry, message_id: str, outcome: Outcome, first: bool) -> None:
        """The task's state from its message's delivery: an ask stays working until its reply, an inform completes,
        a failure fails it; held (the receiving user decides) and unknown keep it working, never resent. The caller
        holds `task.lock` and has checked the task is still open to this move."""
        answer = outcome.with_(task_id=task.view.task_id)  # the chain's answer, carried on with its task
        if outcome.delivered and is_ask(task):
            opened = [obligation_record(message_id, task.view.task_id, "open", None)] if first else []
            await self.ledger.record_held(task, state=TaskState.WORKING, answer=answer, reason=None, extra=opened)
        elif outcome.state is State.QUEUED and outcome.evidence.get("settles") and not task.awaiting:
            await self.ledger.record_held(task, state=TaskState.WORKING, answer=answer, reason=outcome.reason)  # Gemini
        elif outcome.delivered and task.awaiting:
            await self.ledger.record_held(task, state=TaskState.WORKING, answer=answer, reason=None)
        elif outcome.delivered:
            await self.ledger.record_held(task, state=TaskState.COMPLETED, answer=answer, reason=None)
        elif outcome.state in (State.UNKNOWN, State.HELD):
            # Maybe delivered, maybe not (or not yet): never completed, never failed, never resent.
            await self.ledger.record_held(task, state=TaskState.WORKING, answer=answer, reason=outcome.reason)
        else:
            await self.ledger.record_held(task, state=TaskState.FAILED, answer=answer, reason=outcome.reason)

    def unwritten(self, task: TaskEntry | None, mid: str, *, claimed: bool) -> str | None:
        """Why a queued message is not to be written (its rejection's reason), or None. A canceled task's messages
        never are; nor, once a task has ended, its first message not yet written (its ask expired while queued), or
        a continuation of it whose first message never was (refused, or expired, before it). A continuation of a
        task that ended after its first message was written is written, as it would have been a moment earlier."""
        if task is None:
            return Reason.TASK_ENDED  # only a terminal task is forgotten
        if task.view.state is TaskState.CANCELED:
            return "canceled"  # as the cancel itself withdraws them
        if not task.view.terminal or claimed:
            return None
        first = task.messages[0] if task.messages else mid
        entry = self.receiver.state.messages.get(first)
        if mid == first or (entry is not None and not entry.claimed):
            return task.view.reason or Reason.TASK_ENDED
        return None

    def _settle(self, message_id: str) -> None:
        event = self._settled.pop(message_id, None)
        if event is not None:
            event.set()


def _moves(task: TaskEntry, message_id: str) -> bool:
    """Whether this message's delivery moves its task now (the caller holds `task.lock`): the task is open and not
    waiting for its creator (the session answered, or asked for input, before the harness call returned: that
    settled it), and the message is its turn: the input its receiver asked for last, else its first message. The
    first message's outcome arriving after its creator's input resumed the task is not that input's."""
    if task.view.terminal or task.view.state is TaskState.INPUT_REQUIRED:
        return False
    return message_id == (task.input_turn or (task.messages[0] if task.messages else None))
