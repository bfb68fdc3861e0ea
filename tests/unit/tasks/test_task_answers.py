"""Each task carries its creator's answer record: the chain's outcome stamped with the task, then the task-level
decisions (replied, expired, canceled, refused), and a restarted agent reads the same record back from its journal."""

from __future__ import annotations

from pathlib import Path

from crosstalk.core.kinds import Kind
from crosstalk.core.states import Outcome, Reason, State
from crosstalk.tasks.service import TaskService
from crosstalk.tasks.table import TaskTable
from tests.support.receiver import CAROL, Rig, msg, wait_for
from tests.support.tasks import run_with_service


def replayed(rig: Rig, task_id: str) -> Outcome | None:
    """The answer a restarted agent folds from the task records its journal holds."""
    table = TaskTable(lambda _mid: "")
    for rec in rig.records():
        if rec.get("type") == "task":
            table.apply(rec)
    return table.tasks[task_id].view.answer


def test_a_delivered_inform_answers_the_chains_outcome_with_its_task(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        m = msg("hello")
        view = await svc.send(CAROL, m, task_id=None, return_immediately=False)
        answer = view.answer
        assert answer is not None and (answer.state, answer.message_id, answer.task_id) == (
            State.ACCEPTED,
            m.message_id,
            view.task_id,
        )
        assert answer.evidence == rig.receiver.state.messages[m.message_id].evidence  # the chain's, unchanged
        assert replayed(rig, view.task_id) == answer

    run_with_service(root, body)


def test_an_ask_answers_replied_then_a_late_one_expired(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        ask = msg("safe to merge?", kind=Kind.ASK)
        view = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
        assert view.answer == Outcome(ask.message_id, State.SUBMITTED, task_id=view.task_id)
        await wait_for(lambda: svc.table.tasks[view.task_id].view.delivery == "accepted")
        assert svc.table.tasks[view.task_id].view.answer.state is State.ACCEPTED  # delivered, the reply owed
        done = await svc.reply(ask.message_id, "yes")
        assert done.answer == Outcome(ask.message_id, State.REPLIED, task_id=view.task_id)
        assert replayed(rig, view.task_id) == done.answer

        late = msg("still there?", kind=Kind.ASK).with_(deadline_seconds=1)
        expired = await svc.send(CAROL, late, task_id=None, return_immediately=False)  # waits for the deadline
        assert expired.answer == Outcome(
            late.message_id, State.EXPIRED, Reason.DEADLINE_PASSED, task_id=expired.task_id
        )
        assert expired.delivery == "accepted"  # the delivery stays what the chain said

    run_with_service(root, body)


def test_canceled_and_refused_tasks_answer_so(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        await svc.send(CAROL, msg("first"), task_id=None, return_immediately=True)
        await wait_for(rig.fake.blocked)
        queued = await svc.send(CAROL, msg("second"), task_id=None, return_immediately=True)
        canceled = await svc.cancel(CAROL.agent_id, queued.task_id)
        assert canceled.answer is not None
        assert (canceled.answer.state, canceled.answer.reason) == (State.CANCELED, Reason.CANCELED_BY_CREATOR)
        rig.fake.release()
        command = msg("do it", kind=Kind.COMMAND)
        refused = await svc.send(CAROL, command, task_id=None, return_immediately=False)
        assert refused.answer == Outcome(
            command.message_id, State.REJECTED, "kind:command_needs_parent", task_id=refused.task_id
        )

    run_with_service(root, body, script=["block"])
