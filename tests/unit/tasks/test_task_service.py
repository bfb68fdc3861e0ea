"""The task service over the real receiver chain, journal and fake harness."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.errors import TaskError
from crosstalk.core.kinds import Kind
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.tasks import TaskState
from crosstalk.journal import records as R
from crosstalk.tasks.ledger import ReplyError
from crosstalk.tasks.service import TaskService
from tests.support.receiver import CAROL, Rig, msg, run, wait_for
from tests.support.tasks import crash, restarted, run_with_service

DAVE = Sender(SenderClass.VERIFIED, "da7eda7eda7eda7e", "dave", "a2a")


async def _service(rig: Rig, **kw: Any) -> TaskService:
    svc = TaskService(rig.receiver, **kw)
    await svc.start()
    return svc


def _rig(root: Path, **kw: Any) -> Rig:
    return Rig(root, **kw)


def test_default_wait_returns_completed_delivered_after_one_write(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        m = msg("hello over a2a")
        view = await svc.send(CAROL, m, task_id=None, return_immediately=False)
        assert view.state is TaskState.COMPLETED and view.completion == "delivered"
        assert view.delivery == "accepted" and view.creator == CAROL.agent_id
        assert [h.text for h in view.history] == ["hello over a2a"]
        assert len(rig.writes_for(m.message_id)) == 1
        again = await svc.send(CAROL, m, task_id=None, return_immediately=False)  # same message id
        assert again.task_id == view.task_id and len(rig.fake.writes) == 1

    run_with_service(root, body)


def test_return_immediately_answers_submitted_then_completes(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        view = await svc.send(CAROL, msg("later"), task_id=None, return_immediately=True)
        assert view.state is TaskState.SUBMITTED and view.completion is None
        await wait_for(rig.fake.blocked)
        assert (await svc.get(CAROL.agent_id, view.task_id)).state is TaskState.WORKING
        rig.fake.release()
        await wait_for(lambda: svc.table.tasks[view.task_id].view.terminal)
        assert (await svc.get(CAROL.agent_id, view.task_id)).completion == "delivered"

    run_with_service(root, body, default="block")


@pytest.mark.parametrize(
    ("step", "state", "delivery"),
    [
        ("malformed", TaskState.WORKING, "unknown"),
        ("disconnect", TaskState.WORKING, "unknown"),
        ("refuse", TaskState.FAILED, "unreachable"),
        ("presend", TaskState.FAILED, "unreachable"),
        ("queue", TaskState.COMPLETED, "queued"),
    ],
)
def test_dispatch_outcomes_map_to_task_states_and_unknown_is_never_completed(
    root: Path, step: str, state: TaskState, delivery: str
) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        view = await svc.send(CAROL, msg("x"), task_id=None, return_immediately=False)
        assert (view.state, view.delivery) == (state, delivery)
        assert view.completion == ("delivered" if state is TaskState.COMPLETED else None)

    run_with_service(root, body, script=[step])


def test_policy_refusal_is_a_failed_task_and_limits_are_errors(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        view = await svc.send(CAROL, msg("do it", kind=Kind.COMMAND), task_id=None, return_immediately=False)
        assert (view.state, view.reason) == (TaskState.FAILED, "kind:command_needs_parent")
        assert [h.text for h in view.history] == ["do it"] and rig.fake.writes == []
        looped = msg("loop", hop_chain=(rig.identity.hop_entry,))
        with pytest.raises(TaskError) as err:
            await svc.send(CAROL, looped, task_id=None, return_immediately=False)
        assert err.value.code == TaskError.INVALID and "hop:loop" in err.value.message
        assert (await svc.list(CAROL.agent_id)).total_size == 1  # no task for the refused-by-limit message

    run_with_service(root, body)


def test_cancel_before_dispatch_and_the_dequeue_to_write_window(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        first = await svc.send(CAROL, msg("first"), task_id=None, return_immediately=True)
        await wait_for(rig.fake.blocked)  # the worker holds `first` between claim and harness write
        queued = await svc.send(CAROL, msg("second"), task_id=None, return_immediately=True)
        canceled = await svc.cancel(CAROL.agent_id, queued.task_id)
        assert canceled.state is TaskState.CANCELED
        with pytest.raises(TaskError) as err:
            await svc.cancel(CAROL.agent_id, first.task_id)
        assert err.value.code == TaskError.NOT_CANCELABLE
        with pytest.raises(TaskError) as other:
            await svc.cancel(DAVE.agent_id, first.task_id)
        assert other.value.code == TaskError.NOT_FOUND
        rig.fake.release()
        await wait_for(lambda: svc.table.tasks[first.task_id].view.terminal)
        await asyncio.sleep(0.05)  # what is tested is an absence: the canceled task is never written afterwards
        texts = [w["text"] for w in rig.fake.writes]
        assert texts == ["first"]  # canceled: zero writes; not cancelable: exactly one
        with pytest.raises(TaskError) as done:
            await svc.cancel(CAROL.agent_id, canceled.task_id)
        assert done.value.code == TaskError.NOT_CANCELABLE

    run_with_service(root, body, script=["block"])


def test_get_list_and_continuations_belong_to_the_creator(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        views = [await svc.send(CAROL, msg(f"m{i}"), task_id=None, return_immediately=False) for i in range(3)]
        await svc.send(DAVE, msg("dave's"), task_id=None, return_immediately=False)
        page = await svc.list(CAROL.agent_id, page_size=2)
        assert page.total_size == 3 and len(page.tasks) == 2 and page.next_page_token
        rest = await svc.list(CAROL.agent_id, page_size=2, page_token=page.next_page_token)
        assert {v.task_id for v in (*page.tasks, *rest.tasks)} == {v.task_id for v in views}
        with pytest.raises(TaskError) as err:
            await svc.get(DAVE.agent_id, views[0].task_id)
        assert err.value.code == TaskError.NOT_FOUND
        with pytest.raises(TaskError) as cont:
            await svc.send(DAVE, msg("hijack"), task_id=views[0].task_id, return_immediately=False)
        assert cont.value.code == TaskError.NOT_FOUND
        with pytest.raises(TaskError) as term:
            await svc.send(CAROL, msg("more"), task_id=views[0].task_id, return_immediately=False)
        assert term.value.code == TaskError.UNSUPPORTED
        assert "hijack" not in [w["text"] for w in rig.fake.writes]
        with pytest.raises(TaskError):
            await svc.list(CAROL.agent_id, page_token="garbage!")

    run_with_service(root, body)


def test_ask_completes_with_the_reply_and_continuations_are_checked_again(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        ask = msg("what is the build status?", kind=Kind.ASK)
        view = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
        await wait_for(lambda: svc.table.tasks[view.task_id].view.delivery == "accepted")
        working = await svc.get(CAROL.agent_id, view.task_id)
        assert working.state is TaskState.WORKING and rig.state.open_asks() == 1
        follow = msg("also: which branch?")
        cont = await svc.send(CAROL, follow, task_id=view.task_id, return_immediately=False)
        assert cont.state is TaskState.WORKING and len(rig.fake.writes) == 2
        other_context = msg("wrong conversation").with_(context_id="some-other-context")
        with pytest.raises(TaskError) as ctx_err:
            await svc.send(CAROL, other_context, task_id=view.task_id, return_immediately=False)
        assert ctx_err.value.code == TaskError.INVALID_PARAMS and len(rig.fake.writes) == 2
        command = msg("and deploy it", kind=Kind.COMMAND)
        with pytest.raises(TaskError):  # policy applies to continuations too: carol is not our parent
            await svc.send(CAROL, command, task_id=view.task_id, return_immediately=False)
        done = await svc.reply(follow.message_id, "green, on main")  # any message id of the task
        assert done.state is TaskState.COMPLETED and done.completion == "replied"
        assert done.history[-1].role == "agent" and done.history[-1].text == "green, on main"
        assert (await svc.reply(ask.message_id, "green, on main")).task_id == view.task_id  # same text: fine
        with pytest.raises(ReplyError) as again:
            await svc.reply(ask.message_id, "red")
        assert again.value.code == ReplyError.ALREADY_REPLIED
        assert rig.state.open_asks() == 0
        with pytest.raises(ReplyError) as nosuch:
            await svc.reply("not-a-message", "x")
        assert nosuch.value.code == ReplyError.NO_SUCH_MESSAGE

    run_with_service(root, body)


def test_ask_deadline_fails_the_task_and_closes_the_route(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        ask = msg("quick question", kind=Kind.ASK).with_(deadline_seconds=1)
        view = await svc.send(CAROL, ask, task_id=None, return_immediately=False)  # waits for the deadline
        assert (view.state, view.reason) == (TaskState.FAILED, "deadline_passed")
        with pytest.raises(ReplyError) as late:
            await svc.reply(ask.message_id, "too late")
        assert late.value.code == ReplyError.ASK_CLOSED
        assert rig.state.open_asks() == 0

    run_with_service(root, body)


def test_restart_resumes_unclaimed_tasks_once_and_never_resends_claimed_ones(root: Path) -> None:
    rig = _rig(root, script=["block"])
    ids: dict[str, str] = {}

    async def before_crash() -> None:
        svc = await _service(rig)
        first = await svc.send(CAROL, msg("claimed before the crash"), task_id=None, return_immediately=True)
        await wait_for(rig.fake.blocked)
        second = await svc.send(CAROL, msg("queued at the crash"), task_id=None, return_immediately=True)
        ids.update(first=first.task_id, second=second.task_id)
        # "Crash": stop the worker without letting the blocked dispatch finish.
        crash(svc.worker)

    run(before_crash())
    records = rig.records()
    rig.close()

    rig2 = _rig(root)

    async def after_restart() -> None:
        svc = await restarted(rig2, records)
        try:
            await wait_for(lambda: svc.table.tasks[ids["second"]].view.terminal)
            first = await svc.get(CAROL.agent_id, ids["first"])
            assert (first.state, first.delivery) == (TaskState.WORKING, "unknown")
            assert [w["text"] for w in rig2.fake.writes] == ["queued at the crash"]  # resumed once, nothing resent
        finally:
            await svc.close()

    try:
        run(after_restart())
        kinds = [r["type"] for r in rig2.records()]
        assert R.TASK in kinds
    finally:
        rig2.close()


def test_prune_forgets_terminal_tasks_retention_dropped_and_keeps_open_ones(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        done = await svc.send(CAROL, msg("old news"), task_id=None, return_immediately=False)
        ask = msg("still open?", kind=Kind.ASK)
        open_task = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
        await wait_for(lambda: svc.table.tasks[open_task.task_id].view.delivery == "accepted")
        assert svc.prune(set(), cutoff=time.time() + 1) == 1  # only the terminal one
        with pytest.raises(TaskError):
            await svc.get(CAROL.agent_id, done.task_id)
        assert (await svc.get(CAROL.agent_id, open_task.task_id)).state is TaskState.WORKING
        assert (await svc.reply(ask.message_id, "yes")).state is TaskState.COMPLETED

    run_with_service(root, body)


def test_a_finished_task_never_reopens_when_a_stale_change_lands_after_it(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        ask = msg("quick?", kind=Kind.ASK)
        view = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
        await wait_for(lambda: svc.table.tasks[view.task_id].view.delivery == "accepted")
        done = await svc.reply(ask.message_id, "yes")
        assert done.state is TaskState.COMPLETED
        stale = {**R.received(ask, CAROL, dedupe_key=None, transport="a2a", bind={}), "type": R.TASK}
        stale.update(
            task_id=view.task_id,
            state="working",
            delivery="accepted",
            reason=None,
            entry=None,
            message_id=ask.message_id,
        )
        svc.table.apply(stale)  # e.g. a dispatch outcome computed before the reply was applied
        after = await svc.get(CAROL.agent_id, view.task_id)
        assert after.state is TaskState.COMPLETED and after.completion == "replied"

    run_with_service(root, body)


def test_a_waiting_send_to_an_idle_service_is_journaled_with_its_claim_in_one_write(root: Path) -> None:
    """Nothing queued or dispatching: the task's accept carries its dispatch claim (one durable write before the
    harness, not two). Behind a running dispatch, a waiting send takes the queue's own claim."""

    async def body(rig: Rig, svc: TaskService) -> None:
        before = rig.journal.batches
        view = await svc.send(CAROL, msg("straight through"), task_id=None, return_immediately=False)
        assert view.state is TaskState.COMPLETED and view.delivery == "accepted"
        # 1. received + dispatch claim + task (submitted), 2. the outcome, 3. the task's state (completed)
        assert rig.journal.batches - before == 3
        assert [r["type"] for r in rig.records()] == [R.RECEIVED, R.DISPATCH, R.TASK, R.OUTCOME, R.TASK]

    run_with_service(root, body)


def test_a_claimed_accept_that_never_reached_the_harness_is_unknown_after_a_restart_never_resent(root: Path) -> None:
    rig = _rig(root, script=["block"])
    ids: dict[str, str] = {}

    async def before_crash() -> None:
        svc = await _service(rig)
        sending = asyncio.ensure_future(svc.send(CAROL, msg("claimed with its accept"), task_id=None,
                                                 return_immediately=False))  # fmt: skip
        await wait_for(rig.fake.blocked)
        [tid] = list(svc.table.tasks)
        ids["task"] = tid
        with pytest.raises(TaskError) as err:
            await svc.cancel(CAROL.agent_id, tid)  # claimed from its accept on
        assert err.value.code == TaskError.NOT_CANCELABLE
        crash(svc.worker)
        sending.cancel()

    run(before_crash())
    records = rig.records()
    rig.close()
    kinds = [r["type"] for r in records]
    assert R.DISPATCH in kinds and R.OUTCOME not in kinds
    rig2 = _rig(root)

    async def after_restart() -> None:
        svc = await restarted(rig2, records)
        try:
            view = await svc.get(CAROL.agent_id, ids["task"])
            assert (view.state, view.delivery) == (TaskState.WORKING, "unknown")
            await asyncio.sleep(0.05)  # what is tested is an absence: time for a (wrong) resend to happen
            assert rig2.fake.writes == []  # never resent
        finally:
            await svc.close()

    try:
        run(after_restart())
    finally:
        rig2.close()


def test_a_waiting_send_behind_a_running_dispatch_is_claimed_by_the_queue(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        first = asyncio.ensure_future(svc.send(CAROL, msg("first"), task_id=None, return_immediately=False))
        await wait_for(rig.fake.blocked)
        second = asyncio.ensure_future(svc.send(CAROL, msg("second"), task_id=None, return_immediately=False))
        await wait_for(lambda: len(svc.table.tasks) == 2)
        [tid] = [t for t in svc.table.tasks if svc.table.tasks[t].view.history[0].text == "second"]
        assert svc.table.tasks[tid].view.state is TaskState.SUBMITTED  # queued, not claimed: still cancelable
        mid = svc.table.tasks[tid].view.history[0].message_id
        assert [r["type"] for r in rig.records_for(mid)] == [R.RECEIVED, R.TASK]
        rig.fake.release()
        views = await asyncio.gather(first, second)
        assert [v.state for v in views] == [TaskState.COMPLETED, TaskState.COMPLETED]
        assert [r["type"] for r in rig.records_for(mid)] == [R.RECEIVED, R.TASK, R.DISPATCH, R.OUTCOME, R.TASK]

    run_with_service(root, body, script=["block"])


@pytest.mark.parametrize(("kind", "limit_field", "reason"), [
    (Kind.INFORM, "max_pending_tasks", "admission:pending_tasks"),
    (Kind.ASK, "max_open_asks", "admission:open_asks"),
])  # fmt: skip
def test_concurrent_arrivals_never_pass_an_admission_limit_together(
    root: Path, kind: Kind, limit_field: str, reason: str
) -> None:
    """30 sends at once to a stalled session: each is checked against the others still being journaled, so no
    more than the limit are accepted; the rest are refused with the limit's reason and nothing accepted is lost."""
    from crosstalk.policy import Limits

    async def body(rig: Rig, svc: TaskService) -> None:
        async def one(i: int) -> Any:
            try:
                return await svc.send(CAROL, msg(f"m{i}", kind=kind), task_id=None, return_immediately=True)
            except TaskError as exc:
                return exc

        results = await asyncio.gather(*(one(i) for i in range(30)))
        accepted = [r for r in results if not isinstance(r, TaskError)]
        refused = [r for r in results if isinstance(r, TaskError)]
        assert len(accepted) == 4, [getattr(r, "message", r) for r in results]
        assert all(reason in r.message for r in refused) and len(refused) == 26
        assert len({v.task_id for v in accepted}) == 4 and all(
            t in svc.table.tasks for t in (v.task_id for v in accepted)
        )

    run_with_service(root, body, script=["block"], default="block", limits=Limits(**{limit_field: 4}))


def test_a_stuck_injection_does_not_hold_every_queued_task_for_the_full_timeout(root: Path, monkeypatch) -> None:
    """The first injection into a stuck session waits the full timeout; the ones queued behind it get a short
    probe each (`session_stalled`, unknown: maybe delivered, never resent), and a delivery clears the stall."""
    from crosstalk.receiver import chain

    monkeypatch.setattr(chain, "STALLED_PROBE_S", 0.05)

    async def body(rig: Rig, svc: TaskService) -> None:
        views = [await svc.send(CAROL, msg(f"m{i}"), task_id=None, return_immediately=True) for i in range(4)]
        await wait_for(lambda: all(svc.table.tasks[v.task_id].view.delivery for v in views[:3]))
        await wait_for(lambda: svc.table.tasks[views[3].task_id].view.terminal)
        got = [(svc.table.tasks[v.task_id].view.delivery, svc.table.tasks[v.task_id].view.reason) for v in views]
        assert got[:3] == [
            ("unknown", "inject_timeout"),
            ("unknown", "session_stalled"),
            ("unknown", "session_stalled"),
        ]
        assert got[3] == ("accepted", None)  # the session took it: not stalled any more
        late = await svc.send(CAROL, msg("after"), task_id=None, return_immediately=False)
        assert late.delivery == "accepted"

    run_with_service(root, body, script=["hang", "hang", "hang", "accept"], inject_timeout_s=0.5)
