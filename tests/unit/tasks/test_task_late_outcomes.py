"""A harness that holds a message for its user and says later what the user did (Claude's hold receipts), over the
real receiver chain, journal and task service, with the fake harness's `hold` step and its `settle`."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstalk.core.states import State
from crosstalk.core.tasks import TaskState
from crosstalk.harness.fake.adapter import SETTLE_WORDS
from crosstalk.journal import JournalState
from crosstalk.journal import records as R
from crosstalk.receiver import Receiver
from crosstalk.tasks.service import TaskService
from tests.support.receiver import CAROL, Rig, inbound, msg, run, wait_for
from tests.support.tasks import run_with_service


def outcomes(rig: Rig, mid: str) -> list[str]:
    return [r["state"] for r in rig.records_for(mid, R.OUTCOME)]


@pytest.mark.parametrize(
    ("word", "state", "task_state"),
    [
        ("delivered", State.ACCEPTED, TaskState.COMPLETED),
        ("denied", State.REJECTED, TaskState.FAILED),
        ("expired", State.UNREACHABLE, TaskState.FAILED),
    ],
)
def test_held_then_the_users_word_moves_the_message_and_its_task(
    tmp_path: Path, word: str, state: State, task_state: TaskState
) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        m = msg("for your user")
        view = await svc.send(CAROL, m, task_id=None, return_immediately=False)
        # The sender's wait ends with the harness's first word: held, never accepted, and the task stays open.
        assert (view.state, view.delivery) == (TaskState.WORKING, "held")
        assert rig.writes_for(m.message_id) == []  # the model has not seen it
        assert rig.state.messages[m.message_id].withheld
        rig.fake.settle(m.message_id, word)
        await wait_for(lambda: svc.table.holding(m.message_id).view.state is task_state)  # type: ignore[union-attr]
        assert outcomes(rig, m.message_id) == ["held", state.value]
        final = rig.records_for(m.message_id, R.OUTCOME)[-1]
        assert final["evidence"]["late"] is True
        assert svc.table.holding(m.message_id).view.delivery == state.value  # type: ignore[union-attr]
        assert len(rig.writes_for(m.message_id)) == (1 if word == "delivered" else 0)
        assert rig.state.messages[m.message_id].withheld is (word != "delivered")

    run_with_service(tmp_path, body, script=["hold"])


def test_a_late_word_that_outruns_the_held_answer_is_applied_after_it(tmp_path: Path) -> None:
    """The user may decide before the chain has journaled `held`: the word waits for it, then applies, in order."""

    async def body(rig: Rig, svc: TaskService) -> None:
        m = msg()
        original = rig.fake.inject

        async def hold_then_decide(request):  # type: ignore[no-untyped-def]
            result = await original(request)
            rig.fake.settle(request.message.message_id, "delivered")  # before inject even returns
            return result

        rig.fake.inject = hold_then_decide  # type: ignore[method-assign]
        view = await svc.send(CAROL, m, task_id=None, return_immediately=False)
        assert view.delivery == "held"
        await wait_for(lambda: outcomes(rig, m.message_id) == ["held", "accepted"])

    run_with_service(tmp_path, body, script=["hold"])


def test_a_duplicate_of_a_held_message_answers_its_current_state_and_writes_nothing(tmp_path: Path) -> None:
    rig = Rig(tmp_path, script=["hold"])

    async def main() -> None:
        m = msg()
        first = await rig.receiver.receive(inbound(m))
        again = await rig.receiver.receive(inbound(m))
        assert (first.state, again.state, again.evidence.get("duplicate")) == (State.HELD, State.HELD, True)
        rig.fake.settle(m.message_id, "denied")
        await wait_for(lambda: rig.state.messages[m.message_id].state is State.REJECTED)
        third = await rig.receiver.receive(inbound(m))
        assert third.state is State.REJECTED and rig.fake.attempts == 1

    try:
        run(main())
    finally:
        rig.close()


def test_a_held_message_is_settled_unknown_at_restart_and_its_task_follows(tmp_path: Path) -> None:
    """The harness tells only the process that wrote the message; after a restart its word cannot arrive."""
    rig = Rig(tmp_path, script=["hold"])

    async def main() -> None:
        svc = TaskService(rig.receiver)
        await svc.start()
        m = msg()
        view = await svc.send(CAROL, m, task_id=None, return_immediately=False)
        assert view.delivery == "held"
        await svc.close()
        records = rig.records()
        receiver = Receiver(rig.identity, rig.journal, JournalState.replay(records), rig.fake, rig.view)
        written = receiver.reconcile()
        assert [(r["state"], r["reason"].split(":")[0]) for r in written] == [("unknown", "held_when_restarted")]
        svc2 = TaskService(receiver)
        svc2.load(records)
        await svc2.start()
        try:
            task = svc2.table.holding(m.message_id)
            assert task is not None and (task.view.state, task.view.delivery) == (TaskState.WORKING, "unknown")
            assert rig.fake.attempts == 1  # never injected again
        finally:
            await svc2.close()

    try:
        run(main())
    finally:
        rig.close()


def test_the_receivers_settings_refusal_is_rejected_and_withheld(tmp_path: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        m = msg()
        view = await svc.send(CAROL, m, task_id=None, return_immediately=False)
        assert (view.state, view.delivery) == (TaskState.FAILED, "rejected")
        entry = rig.state.messages[m.message_id]
        assert entry.state is State.REJECTED and entry.withheld and "settings" in (entry.reason or "")

    run_with_service(tmp_path, body, script=["decline"])


def test_a_late_word_is_told_to_late_listeners_once(tmp_path: Path) -> None:
    rig = Rig(tmp_path, script=["hold"])
    heard: list[tuple[str, str]] = []
    rig.receiver.add_late_listener(lambda entry, out: heard.append((entry.message_id, out.state.value)))

    async def main() -> None:
        m = msg()
        await rig.receiver.receive(inbound(m))
        rig.fake.settle(m.message_id, "expired")
        await wait_for(lambda: bool(heard))
        assert await rig.receiver.settle_late(m.message_id, SETTLE_WORDS["delivered"]) is None
        assert heard == [(m.message_id, "unreachable")]  # a word on a settled message changes nothing

    try:
        run(main())
    finally:
        rig.close()


def test_a_queued_message_lost_unread_moves_to_unreachable_and_its_ask_fails(tmp_path: Path) -> None:
    """Qwen's `delivered` is queued; `expired` after it (the session exited with it unread) is the harness's later
    word on it: journaled, its ask task failed. A later delivered or queued word changes nothing."""
    from crosstalk.core.kinds import Kind
    from crosstalk.harness.base import InjectResult

    lost = InjectResult(State.UNREACHABLE, "expired: it never reached the model", {"qwen": "receipt"})

    async def body(rig: Rig, svc: TaskService) -> None:
        m = msg("for later", kind=Kind.ASK)
        await svc.send(CAROL, m, task_id=None, return_immediately=True)
        await wait_for(lambda: svc.table.holding(m.message_id).view.delivery == "queued")  # type: ignore[union-attr]
        assert svc.table.holding(m.message_id).view.state is TaskState.WORKING  # type: ignore[union-attr]
        assert await rig.receiver.settle_late(m.message_id, InjectResult(State.QUEUED, "again")) is None
        moved = await rig.receiver.settle_late(m.message_id, lost)
        assert moved is not None and moved.state is State.UNREACHABLE and moved.evidence["after"] == "queued"
        await wait_for(lambda: svc.table.holding(m.message_id).view.state is TaskState.FAILED)  # type: ignore[union-attr]
        assert outcomes(rig, m.message_id) == ["queued", "unreachable"]
        assert await rig.receiver.settle_late(m.message_id, lost) is None  # once

    run_with_service(tmp_path, body, script=["queue"])


def test_a_released_held_message_may_settle_queued(tmp_path: Path) -> None:
    """A harness that queues what it delivers (Qwen) settles a released message `queued`: one state per word."""
    from crosstalk.harness.base import InjectResult

    async def body(rig: Rig, svc: TaskService) -> None:
        m = msg()
        view = await svc.send(CAROL, m, task_id=None, return_immediately=False)
        assert view.delivery == "held"
        rig.fake.held.pop(m.message_id)
        await rig.receiver.settle_late(m.message_id, InjectResult(State.QUEUED, "released by its user"))
        await wait_for(lambda: svc.table.holding(m.message_id).view.state is TaskState.COMPLETED)  # type: ignore[union-attr]
        assert outcomes(rig, m.message_id) == ["held", "queued"]

    run_with_service(tmp_path, body, script=["hold"])
