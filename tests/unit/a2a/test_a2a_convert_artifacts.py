"""Artifacts, input_required and direct-message answers across the protobuf edge, both directions."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict, ParseDict

from crosstalk.core.tasks import Artifact, ArtifactPart, HistoryEntry, TaskApi, TaskState, TaskView
from crosstalk.ingress.a2a.convert import (
    artifact_from_a2a,
    artifact_to_a2a,
    direct_reply_to_a2a,
    task_from_a2a,
    task_to_a2a,
)
from crosstalk.ingress.a2a.handler import SENDER_STATE_KEY, A2ARequestHandler
from tests.support.a2a_fake_tasks import ALICE

PARTS = (
    ArtifactPart(text="Generated text content"),
    ArtifactPart(raw="dGNr", media_type="text/plain", filename="output.txt"),
    ArtifactPart(url="https://example.com/output.txt", media_type="text/plain", filename="output.txt"),
    ArtifactPart(data={"key": "value", "count": 42, "nested": [1, "two", None]}),
)


def view(**kw: Any) -> TaskView:
    base: dict[str, Any] = {
        "task_id": "task-1",
        "context_id": "ctx-1",
        "creator": ALICE.agent_id,
        "kind": "inform",
        "state": TaskState.COMPLETED,
        "delivery": "accepted",
        "history": (HistoryEntry("m-1", "user", "make things", {"kind": "inform", "delivery": "auto"}),),
        "updated_at": 1_700_000_000.5,
    }
    return TaskView(**{**base, **kw})


def test_artifacts_of_every_part_kind_travel_as_the_spec_shapes_them():
    arts = (Artifact("art-1", PARTS[:2], name="outputs"), Artifact("art-2", PARTS[2:]))
    wire = MessageToDict(task_to_a2a(view(artifacts=arts)))
    assert wire["artifacts"] == [
        {
            "artifactId": "art-1",
            "name": "outputs",
            "parts": [
                {"text": "Generated text content"},
                {"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"},
            ],
        },
        {
            "artifactId": "art-2",
            "parts": [
                {"url": "https://example.com/output.txt", "mediaType": "text/plain", "filename": "output.txt"},
                {"data": {"key": "value", "count": 42.0, "nested": [1.0, "two", None]}},
            ],
        },
    ]
    assert wire["metadata"]["crosstalk"]["completion"] == "replied"  # outputs are an answer
    assert "artifacts" not in MessageToDict(task_to_a2a(view()))


def test_artifacts_round_trip_through_the_client_translation():
    arts = (Artifact("art-1", PARTS, name="outputs"),)
    back = task_from_a2a(task_to_a2a(view(artifacts=arts)))
    assert back.artifacts[0].artifact_id == "art-1" and back.artifacts[0].name == "outputs"
    assert back.artifacts[0].parts[:3] == PARTS[:3]
    assert back.artifacts[0].parts[3].data == {"key": "value", "count": 42.0, "nested": [1.0, "two", None]}
    one = artifact_from_a2a(artifact_to_a2a(Artifact("a", (PARTS[1],))))
    assert one == Artifact("a", (PARTS[1],))
    # Records carry them as plain JSON (the journal's task record).
    assert Artifact.from_dict(arts[0].to_dict()) == arts[0]


def test_input_required_travels_both_ways_with_the_question_as_status_message():
    asking = view(
        state=TaskState.INPUT_REQUIRED,
        history=(*view().history, HistoryEntry("q-1", "agent", "which branch?")),
    )
    task = task_to_a2a(asking)
    assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text == "which branch?" and task.status.message.role == pb.ROLE_AGENT
    meta = MessageToDict(task.metadata)["crosstalk"]
    assert "completion" not in meta  # interrupted, not completed
    back = task_from_a2a(task)
    assert back.state is TaskState.INPUT_REQUIRED and not back.terminal and back.reason is None


def test_direct_reply_is_a_message_only_for_a_direct_answer():
    answered = view(direct=True, history=(*view().history, HistoryEntry("r-1", "agent", "Direct message response")))
    msg = direct_reply_to_a2a(answered)
    assert msg is not None
    assert (msg.role, [p.text for p in msg.parts], msg.context_id, msg.message_id) == (
        pb.ROLE_AGENT,
        ["Direct message response"],
        "ctx-1",
        "r-1",
    )
    assert direct_reply_to_a2a(view()) is None
    assert direct_reply_to_a2a(view(direct=True)) is None  # nothing to show as a message: the task instead


class _Answering(TaskApi):
    def __init__(self, answer: TaskView) -> None:
        self.answer = answer

    async def send(self, sender: Any, message: Any, *, task_id: str | None, return_immediately: bool) -> TaskView:
        return self.answer


def _send(handler: A2ARequestHandler) -> Any:
    request = ParseDict(
        {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}, pb.SendMessageRequest()
    )
    context = ServerCallContext(state={SENDER_STATE_KEY: ALICE})
    return asyncio.run(handler.on_message_send(request, context))


def test_handler_answers_a_direct_reply_with_a_message_and_anything_else_with_the_task():
    direct = view(direct=True, history=(*view().history, HistoryEntry("r-1", "agent", "hello")))
    got = _send(A2ARequestHandler(_Answering(direct), to="receiver"))
    assert isinstance(got, pb.Message) and got.parts[0].text == "hello"
    arts = view(artifacts=(Artifact("a", PARTS[:1]),))
    task = _send(A2ARequestHandler(_Answering(arts), to="receiver"))
    assert isinstance(task, pb.Task) and task.artifacts[0].parts[0].text == "Generated text content"
