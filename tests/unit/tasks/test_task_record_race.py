"""Two records on one task, one from the session's answer and one from the dispatch worker after the harness call,
never lose each other (a lost update in TaskLedger.record, found 2026-12-04).

The interleaving is scripted, not timed: the session answers from inside its inject (require_input, or an ask's
reply), and that answer's record is made durable but held before it is applied until the harness call has returned
to the worker. The worker then decides its own record (after-dispatch: working, or the ask's obligation opened) while
the answer is durable but not yet in the table. Before the fix, both records were built from the same view and the
worker's, landing last, overwrote the answer in memory and in the journal."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from crosstalk.core.kinds import Kind
from crosstalk.core.tasks import TaskState
from crosstalk.harness.base import InjectRequest, InjectResult
from crosstalk.harness.fake import FakeHarness
from crosstalk.journal import JournalState
from crosstalk.journal import records as R
from crosstalk.receiver import Inbound, Receiver
from crosstalk.tasks.service import TaskService
from tests.support.receiver import CAROL, WAIT_S, Rig, msg, run, settle

Answer = Callable[[str], Awaitable[object]]


class AnsweringFake(FakeHarness):
    """A session that answers a message before its inject returns: `answer_with(message_id)` runs as its own task
    (as a session's tool call would), and inject returns once that answer's record is durable (`durable`)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer_with: Callable[[str], Answer | None] | None = None
        self.durable = asyncio.Event()
        self.answers: list[asyncio.Future[object]] = []

    async def inject(self, request: InjectRequest) -> InjectResult:
        result = await super().inject(request)
        answer = self.answer_with(request.message.message_id) if self.answer_with else None
        if answer is not None:
            self.answers.append(asyncio.ensure_future(answer))
            await asyncio.wait_for(self.durable.wait(), WAIT_S)
        return result


def _hold_the_answer(receiver: Receiver, fake: AnsweringFake) -> None:
    """The session's answer (its task record carries the agent's text) is journaled, then held before the ledger
    applies it until the dispatch's harness call has returned to the worker."""
    record, dispatch = receiver.record, receiver.dispatch
    returned = asyncio.Event()

    async def held_record(records: list[dict[str, Any]]) -> None:
        await record(records)
        if any(r.get("type") == R.TASK and r.get("entry") == "agent" for r in records):
            fake.durable.set()
            await asyncio.wait_for(returned.wait(), WAIT_S)

    async def marked_dispatch(inbound: Inbound, *, claimed: bool = False) -> Any:
        outcome = await dispatch(inbound, claimed=claimed)
        returned.set()  # the worker goes on from here in this same step; the held answer wakes after it
        return outcome

    receiver.record = held_record  # type: ignore[method-assign]
    receiver.dispatch = marked_dispatch  # type: ignore[method-assign]


def _race(root: Path, kind: Kind, answer: Callable[[TaskService, str], Answer | None]) -> tuple[Any, ...]:
    """Send one message whose session answers inside inject; the task as the live agent and a replay see it, and
    the open reply obligations of each."""
    fake = AnsweringFake()
    rig = Rig(root, fake=fake)
    live: dict[str, Any] = {}

    async def body() -> None:
        svc = TaskService(rig.receiver)
        fake.answer_with = lambda mid: answer(svc, mid)
        _hold_the_answer(rig.receiver, fake)
        await svc.start()
        try:
            m = msg("which branch?", kind=kind)
            sent = await svc.send(CAROL, m, task_id=None, return_immediately=True)
            settled = svc.worker.pending(m.message_id)
            assert settled is not None
            await settle(settled.wait())
            await settle(asyncio.gather(*fake.answers))
            live.update(task=svc.table.tasks[sent.task_id].view, open_asks=rig.state.open_asks(), tid=sent.task_id)
        finally:
            await svc.close()

    try:
        run(body())
        records = rig.records()
    finally:
        rig.close()
    replayed = TaskService(Receiver(rig.identity, rig.journal, JournalState.replay(records), rig.fake, rig.view))
    replayed.load(records)
    return live["task"], live["open_asks"], replayed.table.tasks[live["tid"]].view, JournalState.replay(records)


def _require_input(svc: TaskService, mid: str) -> Answer:
    svc.expect_answer(mid)  # synchronously, before inject returns, as a session's harness does
    return svc.require_input(mid, "main or dev?")


def test_require_input_inside_inject_is_not_overwritten_by_the_dispatch_record(root: Path) -> None:
    live, _, replayed, _ = _race(root, Kind.INFORM, _require_input)
    assert live.state is TaskState.INPUT_REQUIRED
    assert live.history[-1].text == "main or dev?"
    assert replayed.state is TaskState.INPUT_REQUIRED  # the journal ends with the session's answer, not `working`


def test_a_reply_inside_inject_keeps_the_ask_closed(root: Path) -> None:
    live, open_asks, replayed, state = _race(root, Kind.ASK, lambda svc, mid: svc.reply(mid, "main"))
    assert live.state is TaskState.COMPLETED and live.history[-1].text == "main"
    assert replayed.state is TaskState.COMPLETED
    # The dispatch's "obligation open" record never follows the reply's "closed": no reply is owed.
    assert open_asks == 0 and state.open_asks() == 0


def test_a_continuation_journaled_while_the_worker_claims_does_not_unclaim_the_task(root: Path) -> None:
    """The creator's next message is built while its task is still submitted; the worker claims the task's first
    message while that record is being made durable. Applied after the claim, it leaves the task working (claimed,
    not cancelable), not submitted."""
    rig = Rig(root, script=["block"])

    async def body() -> None:
        svc = TaskService(rig.receiver)
        receive = rig.receiver.receive

        async def after_the_claim(inbound: Inbound, **kw: Any) -> Any:
            if inbound.message.text == "and another thing":
                await asyncio.wait_for(rig.fake.blocked.wait(), WAIT_S)  # the worker claimed, and is in inject
            return await receive(inbound, **kw)

        rig.receiver.receive = after_the_claim  # type: ignore[method-assign]
        await svc.start()
        try:
            first = msg("start")
            sent = await svc.send(CAROL, first, task_id=None, return_immediately=True)
            assert sent.state is TaskState.SUBMITTED
            more = await svc.send(CAROL, msg("and another thing"), task_id=sent.task_id, return_immediately=True)
            assert more.state is TaskState.WORKING and svc.table.tasks[sent.task_id].claimed
            rig.fake.release()
            settled = svc.worker.pending(first.message_id)
            if settled is not None:
                await settle(settled.wait())
            assert svc.table.tasks[sent.task_id].view.state is TaskState.COMPLETED
        finally:
            await svc.close()

    try:
        run(body())
    finally:
        rig.close()
