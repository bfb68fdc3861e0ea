"""The task service's one dispatch worker: journaled task messages, dispatched in order.

A message the chain journaled as submitted (`receive(defer=True)`) is queued here. The worker claims a task's first
message in the same event-loop step as its dequeue (so a cancel either wins before it, with zero harness writes, or
is refused after it), runs the chain's deferred half (`Receiver.dispatch`: claim, inject, outcome), then moves the
task on from the outcome: an ask stays working until its reply, an inform completes, a failure fails it, and an
unknown delivery stays working (maybe delivered, never resent). Each queued message has a settled event, set once its
dispatch outcome is known, that a waiting sender watches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from crosstalk.core.states import Outcome, State
from crosstalk.core.tasks import TaskState
from crosstalk.fs import trace
from crosstalk.receiver import Inbound, Receiver
from crosstalk.tasks.ledger import TaskLedger, is_ask
from crosstalk.tasks.table import TaskEntry, TaskTable, obligation_record

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0  # a cancelled dispatch gives up its harness call at once; more is a bug, logged


class DispatchWorker:
    def __init__(self, receiver: Receiver, table: TaskTable, ledger: TaskLedger) -> None:
        self.receiver = receiver
        self.table = table
        self.ledger = ledger
        self._queue: asyncio.Queue[tuple[str, Inbound, bool]] = asyncio.Queue()  # (task, message, claimed)
        self._settled: dict[str, asyncio.Event] = {}  # message id → set once its dispatch outcome is known
        self._task: asyncio.Task[None] | None = None
        self._running = False  # dispatching a message now

    def start(self) -> None:
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
        """Started, and nothing queued or dispatching: a message queued now is dispatched next."""
        return self._task is not None and not (self._running or self._queue.qsize())

    def enqueue(self, task_id: str, inbound: Inbound, *, claimed: bool = False) -> None:
        """Queue a message; its settled event is set once the dispatch outcome is known. `claimed`: its dispatch
        claim was journaled with it (the worker writes none)."""
        self._settled[inbound.message.message_id] = asyncio.Event()
        self._queue.put_nowait((task_id, inbound, claimed))

    def pending(self, message_id: str) -> asyncio.Event | None:
        """The settled event of a message still queued or dispatching; None once its outcome is known."""
        return self._settled.get(message_id)

    async def _work(self) -> None:
        me = asyncio.current_task()
        while True:
            if me is not None and me.cancelling():
                # Asked to end while a dispatch ran, and the request was lost on the way (Python 3.11's wait_for
                # returns a result that came in with the cancel, dropping it): end now, not at the next message.
                raise asyncio.CancelledError
            tid, inbound, claimed = await self._queue.get()
            mid = inbound.message.message_id
            self._running = True
            try:
                task = await self._take(tid, mid, claimed)
                if task is None:
                    continue  # canceled (or settled) while queued: nothing is written to the session
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

    async def _take(self, tid: str, mid: str, claimed: bool) -> TaskEntry | None:
        """The task of a message just taken from the queue, the message marked as being written (`sending`, and a
        first message claimed) in the same event-loop step as the decision, so a cancel either wins before it, with
        zero harness writes, or is refused after it. None: nothing is to be written (its task is gone or canceled,
        or its first message was claimed or settled while queued)."""
        task = self.table.get(tid)
        if task is not None and task.canceling:
            async with task.lock:  # a cancel being made durable (bounded by its journal write): its end decides
                pass
        if task is None or task.view.state is TaskState.CANCELED:
            return None
        if task.messages and task.messages[0] == mid and not claimed:
            if task.claimed or task.view.state is not TaskState.SUBMITTED:
                return None
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
