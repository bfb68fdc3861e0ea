"""The delivery answer record crosses A2A unchanged: a task's answer goes out as metadata.crosstalk.answer and comes
back as the same Outcome; an agent that sends none (or a damaged one) gives no answer, never a made-up one."""

from __future__ import annotations

import pytest
from google.protobuf.struct_pb2 import Struct

from crosstalk.core.states import Outcome, Reason, State
from crosstalk.core.tasks import HistoryEntry, TaskState, TaskView
from crosstalk.ingress.a2a.convert import META_KEY, task_from_a2a, task_to_a2a


def view(answer: Outcome | None) -> TaskView:
    return TaskView(
        task_id="t-1",
        context_id="c-1",
        creator="alice",
        kind="ask",
        state=TaskState.FAILED,
        reason=Reason.DEADLINE_PASSED,
        delivery="accepted",
        answer=answer,
        history=(HistoryEntry("m-1", "user", "safe to merge?"),),
    )


@pytest.mark.parametrize(
    "answer",
    [
        Outcome("m-1", State.EXPIRED, Reason.DEADLINE_PASSED, task_id="t-1"),
        Outcome("m-1", State.QUEUED, "turn_refused_appended", {"fake": "append", "late": True}, "t-1"),
        None,
    ],
)
def test_the_answer_round_trips(answer: Outcome | None) -> None:
    back = task_from_a2a(task_to_a2a(view(answer)))
    assert back.answer == answer
    assert back.delivery == "accepted" and back.reason == "deadline_passed"


def test_a_damaged_answer_is_no_answer() -> None:
    task = task_to_a2a(view(None))
    meta = Struct()
    meta.update({META_KEY: {"kind": "ask", "answer": {"message_id": "m-1", "state": "delivered"}}})
    task.metadata.CopyFrom(meta)
    assert task_from_a2a(task).answer is None
