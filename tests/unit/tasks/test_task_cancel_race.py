"""A cancel and a continuation on one task end one way or the other, never both (found 2026-12-04): either the
cancel wins and the continuation is withdrawn, never written to the session, or the continuation is being written
and the cancel is refused. Before, the worker checked only a task's first message against a cancel: a continuation
queued behind another task's write, or taken by the worker and waiting for its dispatch record, was written to the
session of a task its creator had just been told was canceled.

The interleavings are scripted with events, not timed: another task's write blocks the worker (the fake's `block`)
so the continuation stays queued, and a hook on the receiver holds a chosen journal write while the test acts. A task
waiting for its creator's input with a continuation queued comes from a session that asks a second question before
the creator's first answer reached it (require_input again)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from crosstalk.core.errors import TaskError
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message
from crosstalk.core.states import State
from crosstalk.core.tasks import TaskState
from crosstalk.journal import JournalError
from crosstalk.journal import records as R
from crosstalk.receiver import Inbound
from crosstalk.tasks.service import TaskService
from tests.support.receiver import CAROL, Rig, msg, settle, wait_for
from tests.support.tasks import hold_records, run_with_service

Records = list[dict[str, Any]]


def _texts(rig: Rig) -> list[str]:
    return [w["text"] for w in rig.fake.writes]


async def _asked_twice(rig: Rig, svc: TaskService, answer: Message, other: Message | None = None) -> str:
    """An ask whose session asks for input, the creator's answer queued behind another task's (`other`) blocked
    write, then the session asks again: the task waits for its creator with `answer` still queued. Its task id."""
    ask = msg("which branch?", kind=Kind.ASK)
    sent = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
    await wait_for(lambda: svc.table.tasks[sent.task_id].view.delivery == State.ACCEPTED.value)
    await svc.require_input(ask.message_id, "main or dev?")
    rig.fake.push("block")
    await svc.send(CAROL, other or msg("other"), task_id=None, return_immediately=True)
    await settle(rig.fake.blocked.wait())  # the worker writes the other task's message; `answer` waits behind it
    resumed = await svc.send(CAROL, answer, task_id=sent.task_id, return_immediately=True)
    assert resumed.state is TaskState.WORKING
    await svc.require_input(ask.message_id, "and which commit?")
    return sent.task_id


async def _settled(svc: TaskService, message: Message) -> None:
    pending = svc.worker.pending(message.message_id)
    if pending is not None:
        await settle(pending.wait())


def _withdrawn(rig: Rig, message: Message) -> None:
    """Journaled, then settled as rejected (canceled) without a dispatch claim: it never reached the harness."""
    assert R.DISPATCH not in rig.types_for(message.message_id)
    outcomes = rig.records_for(message.message_id, R.OUTCOME)
    assert [(o["state"], o["reason"]) for o in outcomes] == [(State.REJECTED.value, "canceled")]


def test_a_queued_continuation_of_a_task_canceled_while_it_waits_for_input_is_never_written(root: Any) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        answer = msg("main")
        tid = await _asked_twice(rig, svc, answer)
        canceled = await svc.cancel(CAROL.agent_id, tid)
        assert canceled.state is TaskState.CANCELED
        rig.fake.release()
        await _settled(svc, answer)
        assert _texts(rig) == ["which branch?", "other"]
        _withdrawn(rig, answer)

    run_with_service(root, body)


def test_a_queued_continuation_of_a_task_canceled_before_its_dispatch_is_never_written(root: Any) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        await svc.send(CAROL, msg("other"), task_id=None, return_immediately=True)
        await settle(rig.fake.blocked.wait())
        first, more = msg("start"), msg("and another thing")
        sent = await svc.send(CAROL, first, task_id=None, return_immediately=True)
        await svc.send(CAROL, more, task_id=sent.task_id, return_immediately=True)
        assert (await svc.cancel(CAROL.agent_id, sent.task_id)).state is TaskState.CANCELED
        rig.fake.release()
        await _settled(svc, more)
        assert _texts(rig) == ["other"]
        _withdrawn(rig, first)
        _withdrawn(rig, more)

    run_with_service(root, body, script=["block"])


def test_a_cancel_while_the_worker_claims_the_continuation_is_refused_and_it_is_written_once(root: Any) -> None:
    """The worker took the continuation and waits for its dispatch record to be durable (the harness not yet
    called); the task waits for its creator. The cancel is refused: the continuation is being written."""

    async def body(rig: Rig, svc: TaskService) -> None:
        answer = msg("main")
        claim = hold_records(
            rig, lambda recs: any(r["type"] == R.DISPATCH and r["message_id"] == answer.message_id for r in recs)
        )
        tid = await _asked_twice(rig, svc, answer)
        rig.fake.release()
        await settle(claim.reached.wait())
        with pytest.raises(TaskError) as refused:
            await svc.cancel(CAROL.agent_id, tid)
        assert refused.value.code == TaskError.NOT_CANCELABLE
        claim.go.set()
        await _settled(svc, answer)
        assert _texts(rig) == ["which branch?", "other", "main"]
        # The session's second question stands: the task waits for its creator, as before the continuation.
        assert svc.table.tasks[tid].view.state is TaskState.INPUT_REQUIRED

    run_with_service(root, body)


def _cancel_held_while_the_worker_dequeues(fail: bool) -> Callable[[Rig, TaskService], Awaitable[None]]:
    """The cancel's record waits before it is written; meanwhile the worker finishes the other task and takes the
    queued continuation from its queue (in the step that settles the other task). Then the record is written, or
    fails."""

    async def body(rig: Rig, svc: TaskService) -> None:
        answer, other = msg("main"), msg("other")
        cancel = hold_records(
            rig, lambda recs: any(r["type"] == R.TASK and r["state"] == TaskState.CANCELED.value for r in recs)
        )
        tid = await _asked_twice(rig, svc, answer, other)
        canceling = asyncio.ensure_future(svc.cancel(CAROL.agent_id, tid))
        try:
            await settle(cancel.reached.wait())
            rig.fake.release()
            await wait_for(lambda: svc.worker.pending(other.message_id) is None)
            cancel.fail = fail
            cancel.go.set()
            if fail:
                with pytest.raises(JournalError):
                    await settle(canceling)
            else:
                assert (await settle(canceling)).state is TaskState.CANCELED
        finally:
            canceling.cancel()
        await _settled(svc, answer)

    return body


def test_a_cancel_being_journaled_when_the_worker_dequeues_the_continuation_wins(root: Any) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        await _cancel_held_while_the_worker_dequeues(fail=False)(rig, svc)
        assert _texts(rig) == ["which branch?", "other"]

    run_with_service(root, body)


def test_a_cancel_that_fails_to_journal_leaves_the_continuation_to_the_worker(root: Any) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        await _cancel_held_while_the_worker_dequeues(fail=True)(rig, svc)
        assert _texts(rig) == ["which branch?", "other", "main"]

    run_with_service(root, body)


def test_the_first_messages_outcome_after_the_creators_input_does_not_move_the_task(root: Any) -> None:
    """The session asks for input inside the first message's write; the creator's input resumes the task before the
    worker moves it on that first write's outcome. Only the input's own outcome moves it: refused by the session,
    the task fails (before, the first message's delivery completed it, the input never written)."""

    async def body(rig: Rig, svc: TaskService) -> None:
        first, answer = msg("start"), msg("main")
        dispatch, inject = rig.receiver.dispatch, rig.fake.inject
        asked, resumed = asyncio.Event(), asyncio.Event()

        async def answered_inside(request: Any) -> Any:
            result = await inject(request)
            if request.message.message_id == first.message_id:
                svc.expect_answer(first.message_id)
                question = asyncio.ensure_future(svc.require_input(first.message_id, "which branch?"))
                question.add_done_callback(lambda _: asked.set())
            return result

        async def returns_after_the_input(inbound: Inbound, *, claimed: bool = False) -> Any:
            outcome = await dispatch(inbound, claimed=claimed)
            if inbound.message.message_id == first.message_id:
                await settle(resumed.wait())
            return outcome

        rig.fake.inject = answered_inside  # type: ignore[method-assign]
        rig.receiver.dispatch = returns_after_the_input  # type: ignore[method-assign]
        sent = await svc.send(CAROL, first, task_id=None, return_immediately=True)
        await settle(asked.wait())
        rig.fake.push("refuse")
        assert (await svc.send(CAROL, answer, task_id=sent.task_id, return_immediately=True)).state is (
            TaskState.WORKING
        )
        resumed.set()
        await _settled(svc, answer)
        view = svc.table.tasks[sent.task_id].view
        assert (view.state, view.delivery) == (TaskState.FAILED, State.UNREACHABLE.value)
        assert _texts(rig) == ["start"]

    run_with_service(root, body)
