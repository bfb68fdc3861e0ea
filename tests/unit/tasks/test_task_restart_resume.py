"""What a restart finds queued is written after it, in order, or settled, never left journaled and open (found
2026-12-04). Before, start() resumed a task's first message only: a continuation journaled but not yet written when
the agent stopped (the creator's answer to an input request, queued behind another task's write) stayed submitted
for good, its task working, the message neither written nor failed (and counted against the pending limit).

Also here: a new task journaled with its dispatch claim (its creator waits, the worker idle) is the next message
written, whatever is queued while its journal write runs; before, a continuation queued in that window was written
first, and a crash then read the claimed task back as unknown though it never reached the harness.

Interleavings are scripted with events: another task's write blocks the worker (the fake's `block`) so what follows
stays queued, a "crash" cancels the worker there, and the service is started again on the same journal."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message
from crosstalk.core.states import State
from crosstalk.core.tasks import TaskState
from crosstalk.harness.base import InjectRequest, InjectResult
from crosstalk.journal import records as R
from crosstalk.policy import Role
from crosstalk.tasks.service import TaskService
from tests.support.receiver import CAROL, Rig, msg, run, settle, wait_for
from tests.support.tasks import Records, crash, hold_records, restarted, run_with_service

Phase = Callable[[Rig, TaskService], Awaitable[None]]


def _texts(rig: Rig) -> list[str]:
    return [w["text"] for w in rig.fake.writes]


def _outcomes(rig: Rig, message: Message) -> list[tuple[str, str | None]]:
    return [(o["state"], o["reason"]) for o in rig.records_for(message.message_id, R.OUTCOME)]


async def _settled(svc: TaskService, message: Message) -> None:
    pending = svc.worker.pending(message.message_id)
    if pending is not None:
        await settle(pending.wait())


def _crashed(root: Path, before: Phase) -> Records:
    """Run `before` on a fresh service, then crash it (its worker stopped where it is): the records."""
    rig = Rig(root)

    async def first_run() -> None:
        svc = TaskService(rig.receiver)
        await svc.start()
        await before(rig, svc)
        crash(svc.worker)

    try:
        run(first_run())
        return rig.records()
    finally:
        rig.close()


def _after_restart(
    root: Path,
    records: Records,
    after: Phase,
    before_start: Callable[[TaskService], Awaitable[None]] | None = None,
    **rig_kw: Any,
) -> None:
    rig = Rig(root, **rig_kw)

    async def second_run() -> None:
        svc = await restarted(rig, records, before_start)
        try:
            await after(rig, svc)
        finally:
            await svc.close()

    try:
        run(second_run())
    finally:
        rig.close()


async def _input_queued(rig: Rig, svc: TaskService, answer: Message) -> tuple[str, Message]:
    """An ask whose session asked for input, the creator's answer queued behind another task's blocked write: its
    task id and the ask."""
    ask = msg("which branch?", kind=Kind.ASK)
    sent = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
    await wait_for(lambda: svc.table.tasks[sent.task_id].view.delivery == State.ACCEPTED.value)
    await svc.require_input(ask.message_id, "main or dev?")
    rig.fake.push("block")
    await svc.send(CAROL, msg("other"), task_id=None, return_immediately=True)
    await settle(rig.fake.blocked.wait())
    resumed = await svc.send(CAROL, answer, task_id=sent.task_id, return_immediately=True)
    assert resumed.state is TaskState.WORKING
    return sent.task_id, ask


def test_the_input_queued_when_the_agent_stopped_is_written_after_the_restart_and_moves_its_task(root: Path) -> None:
    answer, ids = msg("main"), {}

    async def before(rig: Rig, svc: TaskService) -> None:
        ids["task"], ids["ask"] = await _input_queued(rig, svc, answer)

    async def after(rig: Rig, svc: TaskService) -> None:
        await _settled(svc, answer)
        assert _texts(rig) == ["main"]  # written once; the other task's blocked write is unknown, never resent
        view = svc.table.tasks[ids["task"]].view
        assert (view.state, view.delivery) == (TaskState.WORKING, State.ACCEPTED.value)
        assert view.answer is not None and view.answer.message_id == answer.message_id  # moved by the input
        done = await svc.reply(ids["ask"].message_id, "main it is")
        assert done.state is TaskState.COMPLETED and svc.state.pending_count() == 0

    records = _crashed(root, before)
    _after_restart(root, records, after)


async def _first_and_more_queued(rig: Rig, svc: TaskService, first: Message, more: Message) -> str:
    rig.fake.push("block")
    await svc.send(CAROL, msg("other"), task_id=None, return_immediately=True)
    await settle(rig.fake.blocked.wait())
    sent = await svc.send(CAROL, first, task_id=None, return_immediately=True)
    await svc.send(CAROL, more, task_id=sent.task_id, return_immediately=True)
    return sent.task_id


def test_a_first_message_and_its_continuation_queued_at_a_restart_are_written_in_order(root: Path) -> None:
    first, more = msg("start"), msg("and another thing")

    async def before(rig: Rig, svc: TaskService) -> None:
        await _first_and_more_queued(rig, svc, first, more)

    async def after(rig: Rig, svc: TaskService) -> None:
        await _settled(svc, more)
        assert _texts(rig) == ["start", "and another thing"]
        assert svc.state.pending_count() == 0

    _after_restart(root, _crashed(root, before), after)


def test_a_message_arriving_while_the_agent_starts_is_written_after_what_the_restart_resumes(root: Path) -> None:
    """The agent's socket answers before its task service starts: a continuation accepted then is queued before
    the service resumes the task's first message, and must still be written after it."""
    first, later = msg("start"), msg("sent during the restart")
    ids: dict[str, str] = {}

    async def before(rig: Rig, svc: TaskService) -> None:
        rig.fake.push("block")
        await svc.send(CAROL, msg("other"), task_id=None, return_immediately=True)
        await settle(rig.fake.blocked.wait())
        ids["task"] = (await svc.send(CAROL, first, task_id=None, return_immediately=True)).task_id

    async def while_starting(svc: TaskService) -> None:
        await svc.send(CAROL, later, task_id=ids["task"], return_immediately=True)

    async def after(rig: Rig, svc: TaskService) -> None:
        await _settled(svc, later)
        assert _texts(rig) == ["start", "sent during the restart"]

    _after_restart(root, _crashed(root, before), after, while_starting)


def test_the_queued_messages_of_a_task_canceled_just_before_a_crash_are_withdrawn_never_written(root: Path) -> None:
    """The cancel is durable, the agent stops before its withdrawals are: the restart withdraws them."""
    first, more = msg("start"), msg("and another thing")

    async def before(rig: Rig, svc: TaskService) -> None:
        tid = await _first_and_more_queued(rig, svc, first, more)
        withdrawal = hold_records(rig, lambda recs: any(r["type"] == R.OUTCOME for r in recs))
        canceling = asyncio.ensure_future(svc.cancel(CAROL.agent_id, tid))
        await settle(withdrawal.reached.wait())
        assert svc.table.tasks[tid].view.state is TaskState.CANCELED
        canceling.cancel()

    async def after(rig: Rig, svc: TaskService) -> None:
        await _settled(svc, more)
        assert _texts(rig) == []
        for message in (first, more):
            assert _outcomes(rig, message) == [(State.REJECTED.value, "canceled")]
            assert R.DISPATCH not in rig.types_for(message.message_id)
        assert svc.state.pending_count() == 0

    _after_restart(root, _crashed(root, before), after)


def test_an_input_the_restart_refuses_is_withdrawn_and_its_task_waits_for_input_again(root: Path) -> None:
    """Checked again on restart, as a first message is: refused (here the agent is now a worker, and carol not its
    parent), the input is settled as rejected, never written, and the task waits for its creator as it did before
    the input came (as a continuation refused on arrival leaves it)."""
    answer, ids = msg("main"), {}

    async def before(rig: Rig, svc: TaskService) -> None:
        ids["task"], _ = await _input_queued(rig, svc, answer)

    async def after(rig: Rig, svc: TaskService) -> None:
        await _settled(svc, answer)
        assert _texts(rig) == []
        [(state, reason)] = _outcomes(rig, answer)
        assert state == State.REJECTED.value and reason is not None and reason.startswith("acl:")
        view = svc.table.tasks[ids["task"]].view
        assert (view.state, view.reason) == (TaskState.INPUT_REQUIRED, reason)
        assert svc.state.pending_count() == 0

    records = _crashed(root, before)
    _after_restart(root, records, after, role=Role.WORKER, owner="0123456789abcdef")


def test_a_queued_ask_whose_deadline_passed_is_withdrawn_with_what_followed_it_not_left_open(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        await svc.send(CAROL, msg("other"), task_id=None, return_immediately=True)
        await settle(rig.fake.blocked.wait())
        ask, more = msg("still there?", kind=Kind.ASK).with_(deadline_seconds=600), msg("and then?")
        sent = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
        await svc.send(CAROL, more, task_id=sent.task_id, return_immediately=True)
        await svc.ledger.expire(sent.task_id)  # its deadline passes while it waits behind the other write
        rig.fake.release()
        await _settled(svc, more)
        assert _texts(rig) == ["other"]  # neither the ask nor what followed it: the ask never reached the session
        for message in (ask, more):
            assert _outcomes(rig, message) == [(State.REJECTED.value, "deadline_passed")]
        assert svc.state.pending_count() == 0

    run_with_service(root, body, script=["block"])


def test_a_new_task_journaled_with_its_claim_is_the_next_write_whatever_is_queued_meanwhile(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        ask = msg("status?", kind=Kind.ASK)
        sent = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
        await wait_for(lambda: svc.table.tasks[sent.task_id].view.delivery == State.ACCEPTED.value)
        new, follow = msg("new task"), msg("also this")
        claim = hold_records(
            rig, lambda recs: any(r["type"] == R.DISPATCH and r["message_id"] == new.message_id for r in recs)
        )
        writing = asyncio.ensure_future(svc.send(CAROL, new, task_id=None, return_immediately=False))
        try:
            await settle(claim.reached.wait())  # the worker was idle: `new` is journaled with its claim
            await svc.send(CAROL, follow, task_id=sent.task_id, return_immediately=True)  # queued meanwhile
            injected: list[tuple[str, list[str]]] = []
            inject = rig.fake.inject

            async def noted(request: InjectRequest) -> InjectResult:
                mid = request.message.message_id
                claimed = [m for m, e in svc.state.messages.items() if e.state is State.DISPATCHING and m != mid]
                injected.append((mid, claimed))
                return await inject(request)

            rig.fake.inject = noted  # type: ignore[method-assign]
            rig.fake.push("block")
            claim.go.set()
            await settle(rig.fake.blocked.wait())
            # A durable claim is the message being written: no other message is claimed and unwritten.
            assert injected == [(new.message_id, [])]
            rig.fake.release()
            assert (await settle(writing)).state is TaskState.COMPLETED
            await _settled(svc, follow)
            assert _texts(rig) == ["status?", "new task", "also this"]
        finally:
            writing.cancel()

    run_with_service(root, body)
