"""What a restart finds among the tasks the journal rebuilt (the task service's start).

Every open task's deadline is re-armed. Every task message journaled but never written (submitted: its first
message, or a continuation such as the creator's answer to an input request) is queued again, in journal order, so
each task's messages are written in the order they came, or settled, never left open: withdrawn (rejected, never
written) when the worker would not write it (its task canceled, or ended before its first message was written), or
when it is refused on being checked again (hop, policy; not load: it was admitted before the restart). A refused first
message fails its task; a refused input leaves its task waiting for input again, as a continuation refused on arrival
leaves it. A first message claimed with no outcome leaves its task working with delivery unknown (never resent); one
held for the receiving user moves its task on the outcome it has since.
"""

from __future__ import annotations

import logging
import time

from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import Outcome, Reason, State
from crosstalk.core.tasks import TaskState
from crosstalk.journal import MessageEntry
from crosstalk.journal import records as R
from crosstalk.policy import Load
from crosstalk.receiver import Inbound, Receiver
from crosstalk.tasks.ledger import TaskLedger
from crosstalk.tasks.owners import via
from crosstalk.tasks.table import TaskEntry, TaskTable
from crosstalk.tasks.worker import DispatchWorker

log = logging.getLogger(__name__)


def inbound_of(entry: MessageEntry) -> Inbound:
    """A journaled task message as the chain was handed it. Raises ValueError or KeyError for an unreadable one."""
    sender = Sender.from_dict(entry.sender)
    return Inbound(Message.from_dict(entry.message, check_size=False), sender, via(sender))


class _Restart:
    def __init__(self, receiver: Receiver, table: TaskTable, ledger: TaskLedger, worker: DispatchWorker) -> None:
        self.receiver = receiver
        self.state = receiver.state
        self.table = table
        self.ledger = ledger
        self.worker = worker
        self.queued: list[tuple[int, str, Inbound]] = []  # (journal position, task, message)

    async def run(self) -> list[tuple[str, Inbound]]:
        now = time.time()
        for task in list(self.table.tasks.values()):
            if not task.view.terminal and task.view.deadline_at is not None:
                self.ledger.arm_deadline(task, max(0.0, task.view.deadline_at - now))
            await self._first(task)
            for mid in list(task.messages):
                entry = self.state.messages.get(mid)
                if entry is not None and entry.state is State.SUBMITTED:
                    await self._submitted(task, entry)
        self.queued.sort(key=lambda q: q[0])
        return [(tid, inbound) for _, tid, inbound in self.queued]

    async def _first(self, task: TaskEntry) -> None:
        """A first message a restart interrupted after its claim: unknown, or held and settled since."""
        first = task.messages[0] if task.messages and not task.view.terminal else None
        entry = self.state.messages.get(first) if first else None
        if entry is None:
            return
        if entry.state in (State.DISPATCHING, State.UNKNOWN) and task.view.state is TaskState.SUBMITTED:
            why = Reason.RESTARTED_DURING_DISPATCH
            answer = self.ledger.answer(task, State.UNKNOWN, why)
            await self.ledger.record(task, state=TaskState.WORKING, answer=answer, reason=why)
        elif entry.state not in (State.HELD, State.SUBMITTED) and task.view.delivery == State.HELD.value:
            # Held when the agent stopped: its message's outcome since (reconciled, or settled) moves the task.
            outcome = Outcome(entry.message_id, entry.state, entry.reason, entry.evidence)
            await self.worker.late(task, entry.message_id, outcome)

    async def _submitted(self, task: TaskEntry, entry: MessageEntry) -> None:
        """A message journaled, never written: queued again, or settled as rejected."""
        mid = entry.message_id
        first = mid == task.messages[0]
        try:
            inbound = inbound_of(entry)
        except (ValueError, KeyError):
            await self._unreadable(task, mid, first)
            return
        why = self.worker.unwritten(task, mid, claimed=False)
        if why is not None:
            await self.worker.withdraw(inbound, why)
            return
        reason, _ = self.receiver.check(inbound, load=Load())  # admitted before the restart: never evicted by load
        if reason is None:
            self.queued.append((entry.seq, task.view.task_id, inbound))
            return
        await self.worker.withdraw(inbound, reason, reconciled=True)
        if first and task.view.state is TaskState.SUBMITTED:
            answer = self.ledger.answer(task, State.REJECTED, reason)
            await self.ledger.record(task, state=TaskState.FAILED, reason=reason, answer=answer)
        elif mid == task.input_turn and task.view.state is TaskState.WORKING:
            answer = self.ledger.answer(task, State.INPUT_REQUIRED, reason)
            await self.ledger.record(task, state=TaskState.INPUT_REQUIRED, reason=reason, answer=answer)

    async def _unreadable(self, task: TaskEntry, mid: str, first: bool) -> None:
        """A record that no longer reads as a message (it was checked when written): rejected, never written; its
        task fails if it was the task's first message."""
        why = Reason.UNREADABLE_RECORD
        log.warning("task %s: message %s is unreadable after the restart", task.view.task_id, mid)
        await self.receiver.record(
            [R.outcome(mid, State.REJECTED, why, self.receiver.identity.binding, reconciled=True)]
        )
        if first and not task.view.terminal:
            answer = self.ledger.answer(task, State.REJECTED, why)
            await self.ledger.record(task, state=TaskState.FAILED, reason=why, answer=answer)


async def resume(
    receiver: Receiver, table: TaskTable, ledger: TaskLedger, worker: DispatchWorker
) -> list[tuple[str, Inbound]]:
    """Settle what a restart interrupted; the messages to write again, in journal order (for `worker.start`)."""
    return await _Restart(receiver, table, ledger, worker).run()
