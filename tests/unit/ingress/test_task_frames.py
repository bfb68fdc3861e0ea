"""Task frames (ingress/task_frames.py) carry what A2A carries: a message reads the same at the receiver, a task the
same at the sender, as through the A2A conversions (ingress/a2a/convert.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from crosstalk.core.errors import TaskError
from crosstalk.core.ids import hop_entry
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message, TextPart, new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import Outcome, State
from crosstalk.core.tasks import Artifact, ArtifactPart, HistoryEntry, TaskState, TaskView
from crosstalk.ingress.a2a.convert import (
    direct_reply_to_a2a,
    message_from_a2a,
    message_to_a2a,
    reply_message_to_view,
    task_from_a2a,
    task_to_a2a,
)
from crosstalk.ingress.errors import FrameError, TaskFramesUnsupported
from crosstalk.ingress.frames import TaskLine, parse_line
from crosstalk.ingress.task_frames import (
    encode_error,
    encode_task_get,
    encode_task_send,
    message_of,
    task_error,
    view_from_dict,
)
from crosstalk.ingress.uds_task_client import _read

pytestmark = pytest.mark.unit

SENDER = Sender(SenderClass.VERIFIED, "a" * 16, "alice", "a2a")


def messages() -> list[Message]:
    ask = new_message("bob", "what is 2+2?", from_="alice", kind="ask", deadline_seconds=30)
    return [
        new_message("bob", "hello", from_="alice"),
        ask.with_(context_id="ctx-1", hop_chain=(hop_entry("x" * 16),)),
        new_message("bob", "an answer", from_="alice", in_reply_to=ask.message_id, delivery="next_turn"),
        Message(message_id=ask.message_id, to="bob", parts=(TextPart("one"), TextPart("two")), from_=None),
    ]


def fields(msg: Message) -> dict[str, object]:
    out = msg.to_dict()
    out.pop("sent_at")  # the receiver stamps its own, as on A2A
    return out


@pytest.mark.parametrize("msg", messages(), ids=["inform", "ask", "reply", "two-parts"])
def test_a_message_reads_at_the_receiver_as_through_a2a(msg: Message) -> None:
    line = parse_line(encode_task_send("tok", msg, return_immediately=True, task_id="t-1")[:-1])
    assert isinstance(line, TaskLine) and line.method == "send" and line.bearer == "tok"
    assert line.params["return_immediately"] is True
    ours = message_of(line.params, to="bob-now", sender_name="alice")
    theirs = message_from_a2a(message_to_a2a(msg, task_id="t-1"), to="bob-now", sender=SENDER)
    assert fields(ours) == fields(theirs)


def view() -> TaskView:
    return TaskView(
        task_id="t-1",
        context_id="c-1",
        creator="a" * 16,
        kind="ask",
        state=TaskState.COMPLETED,
        reason=None,
        delivery="accepted",
        answer=Outcome("m-1", State.REPLIED, None, {"how": "turn"}, "t-1"),
        history=(HistoryEntry("m-1", "user", "q?", {"kind": "ask"}), HistoryEntry("r-1", "agent", "4")),
        created_at=1.0,
        updated_at=2.5,
        artifacts=(Artifact("art-1", (ArtifactPart(text="a table"),), "table"),),
    )


def sender_side(v: TaskView) -> dict[str, object]:
    d = dataclasses.asdict(v)
    d.pop("created_at")  # A2A carries neither; the sender reads neither
    d.pop("deadline_at")
    d["history"] = [(h["message_id"], h["role"], h["text"]) for h in d["history"]]
    return d


def test_a_task_reads_at_the_sender_as_through_a2a() -> None:
    sent = new_message("bob", "q?", kind="ask")
    from crosstalk.ingress.task_frames import encode_view

    ours = _read(encode_view(view()), sent, "sock")
    theirs = task_from_a2a(task_to_a2a(view()), kind="ask")
    assert sender_side(ours) == sender_side(theirs)
    assert ours.creator == "" and ours.answer == view().answer


def test_a_direct_reply_reads_as_a2a_shows_it() -> None:
    sent = new_message("bob", "q?", kind="ask")
    direct = dataclasses.replace(view(), direct=True, artifacts=())
    from crosstalk.ingress.task_frames import encode_view

    ours = _read(encode_view(direct), sent, "sock")
    msg = direct_reply_to_a2a(direct)
    assert msg is not None
    theirs = reply_message_to_view(msg, sent)
    assert sender_side(ours) == sender_side(theirs)


def test_errors_read_as_the_a2a_client_raises_them() -> None:
    with pytest.raises(TaskError) as caught:
        _read(encode_error("task_not_found", "no task t"), None, "sock")
    err = caught.value
    assert err.code == TaskError.NOT_FOUND and err.message == "no task t"
    assert task_error("internal_error", "x") is not None and task_error("failed", "x") is None
    old = json.dumps({"state": "rejected", "reason": "frame: unknown frame type 'task' (expected 'auth' or 'user')"})
    with pytest.raises(TaskFramesUnsupported):
        _read(old.encode(), None, "sock")


def test_bad_task_lines_are_frame_errors() -> None:
    assert isinstance(parse_line(encode_task_get("tok", "t-1")), TaskLine)
    with pytest.raises(FrameError, match="method"):
        parse_line(b'{"type":"task","method":"cancel","bearer":"t"}')
    with pytest.raises(FrameError, match="bearer"):
        parse_line(b'{"type":"task","method":"get"}')
    with pytest.raises(TaskError):
        message_of({"message": "not an object"}, to="bob", sender_name="alice")


def test_an_ask_deadline_and_kind_survive() -> None:
    msg = messages()[1]
    line = parse_line(encode_task_send("tok", msg, return_immediately=False))
    assert isinstance(line, TaskLine)
    got = message_of(line.params, to="bob", sender_name="alice")
    assert got.kind is Kind.ASK and got.deadline_seconds == 30 and got.hop_chain == msg.hop_chain
    assert view_from_dict({"task_id": "t", "state": "working"}).state is TaskState.WORKING
