"""protobuf ⇄ crosstalk translation, both directions, without a server."""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from crosstalk.core.errors import TaskError
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, new_message
from crosstalk.core.tasks import HistoryEntry, TaskState, TaskView
from crosstalk.ingress.a2a.convert import (
    message_from_a2a,
    message_to_a2a,
    reply_message_to_view,
    state_filter_from_a2a,
    task_error_to_a2a,
    task_from_a2a,
    task_to_a2a,
)
from tests.support.a2a_fake_tasks import ALICE

HOP = "0123456789abcdef01234567"


def a2a_message(body: dict) -> pb.Message:
    return ParseDict({"messageId": "m-1", "role": "ROLE_USER", **body}, pb.Message())


def inbound(body: dict) -> Message:
    return message_from_a2a(a2a_message(body), to="receiver", sender=ALICE)


# ------------------------------------------------------------------ A2A Message → crosstalk Message


def test_plain_text_is_an_inform_with_auto_delivery():
    msg = inbound({"parts": [{"text": "hello"}]})
    assert (msg.kind, msg.delivery, msg.text) == (Kind.INFORM, Delivery.AUTO, "hello")
    assert (msg.message_id, msg.to, msg.from_) == ("m-1", "receiver", "alice")
    assert (msg.context_id, msg.task_id, msg.in_reply_to, msg.hop_chain, msg.deadline_seconds) == (
        None,
        None,
        None,
        (),
        0,
    )


def test_text_parts_are_joined_with_newlines():
    msg = inbound({"parts": [{"text": "one"}, {"text": "two", "mediaType": "text/markdown"}]})
    assert msg.text == "one\ntwo"


def test_crosstalk_metadata_is_read():
    msg = inbound(
        {
            "contextId": "ctx-9",
            "taskId": "task-9",
            "parts": [{"text": "q?"}],
            "metadata": {
                "crosstalk": {
                    "kind": "ask",
                    "delivery": "followUp",  # an alias
                    "deadline_seconds": 30,  # arrives as 30.0 through Struct
                    "in_reply_to": "m-0",
                    "hop_chain": [HOP],
                    "from": "alice-display",
                    "future_field": {"ignored": True},
                },
                "other": "ignored",
            },
        }
    )
    assert msg.kind is Kind.ASK and msg.delivery is Delivery.NEXT_TURN
    assert (msg.deadline_seconds, msg.in_reply_to, msg.hop_chain) == (30, "m-0", (HOP,))
    assert (msg.context_id, msg.task_id, msg.from_) == ("ctx-9", "task-9", "alice-display")


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        ({"kind": "shout"}, "message.metadata.crosstalk.kind"),
        ({"delivery": "later"}, "message.metadata.crosstalk.delivery"),
        ({"kind": "ask", "deadline_seconds": 1.5}, "message.metadata.crosstalk.deadline_seconds"),
        ({"kind": "ask", "deadline_seconds": -1}, "message.metadata.crosstalk.deadline_seconds"),
        ({"deadline_seconds": 5}, "message.metadata.crosstalk.deadline_seconds"),  # only an ask has one
        ({"hop_chain": ["not-hex"]}, "message.metadata.crosstalk.hop_chain"),
        ({"hop_chain": "x"}, "message.metadata.crosstalk.hop_chain"),
        ({"in_reply_to": 7}, "message.metadata.crosstalk.in_reply_to"),
    ],
)
def test_bad_crosstalk_metadata_is_invalid_params(meta, field):
    with pytest.raises(InvalidParamsError) as info:
        inbound({"parts": [{"text": "x"}], "metadata": {"crosstalk": meta}})
    assert info.value.message.startswith(field + ":")
    assert info.value.data == {"field": field}


def test_crosstalk_metadata_must_be_an_object():
    with pytest.raises(InvalidParamsError, match=r"message\.metadata\.crosstalk: must be an object"):
        inbound({"parts": [{"text": "x"}], "metadata": {"crosstalk": "ask"}})


@pytest.mark.parametrize(
    ("part", "what"),
    [
        ({"raw": "aGk=", "mediaType": "application/octet-stream"}, "a raw part"),
        ({"url": "https://example.com/x.png"}, "a url part"),
        ({"data": {"k": 1}}, "a data part"),
    ],
)
def test_a_non_text_part_is_content_type_not_supported(part, what):
    with pytest.raises(ContentTypeNotSupportedError) as info:
        inbound({"parts": [{"text": "ok"}, part]})
    assert info.value.message == f"message.parts[1]: only text parts are accepted, got {what}"


def test_a_text_part_with_a_non_text_media_type_is_not_supported():
    with pytest.raises(ContentTypeNotSupportedError, match="only text/\\* media types"):
        inbound({"parts": [{"text": "{}", "mediaType": "application/json"}]})


def test_text_over_64_kib_is_invalid_params():
    with pytest.raises(InvalidParamsError, match=r"message\.parts: text is \d+ bytes, over the 65536-byte limit"):
        inbound({"parts": [{"text": "x" * (64 * 1024 + 1)}]})


def test_no_parts_is_invalid_params():
    with pytest.raises(InvalidParamsError, match=r"message\.parts"):
        inbound({"parts": []})


# ------------------------------------------------------------------ TaskView → A2A Task


def view(**kw) -> TaskView:
    base = dict(
        task_id="task-1",
        context_id="ctx-1",
        creator=ALICE.agent_id,
        kind="ask",
        state=TaskState.COMPLETED,
        delivery="accepted",
        history=(
            HistoryEntry("m-1", "user", "question?"),
            HistoryEntry("r-1", "agent", "first answer", {"from": "bob"}),
            HistoryEntry("m-2", "user", "more?"),
            HistoryEntry("r-2", "agent", "second answer"),
        ),
        created_at=1_700_000_000.0,
        updated_at=1_700_000_001.5,
    )
    base.update(kw)
    return TaskView(**base)


@pytest.mark.parametrize(
    ("state", "wire"),
    [
        (TaskState.SUBMITTED, "TASK_STATE_SUBMITTED"),
        (TaskState.WORKING, "TASK_STATE_WORKING"),
        (TaskState.COMPLETED, "TASK_STATE_COMPLETED"),
        (TaskState.FAILED, "TASK_STATE_FAILED"),
        (TaskState.CANCELED, "TASK_STATE_CANCELED"),
    ],
)
def test_every_state_maps(state, wire):
    task = task_to_a2a(view(state=state))
    assert pb.TaskState.Name(task.status.state) == wire
    assert task_from_a2a(task).state is state


def test_task_carries_history_reply_timestamp_and_metadata():
    d = MessageToDict(task_to_a2a(view()))
    assert (d["id"], d["contextId"]) == ("task-1", "ctx-1")
    assert d["status"]["timestamp"].startswith("2023-11-14T22:13:21.5")
    assert d["status"]["message"]["messageId"] == "r-2"
    assert d["status"]["message"]["role"] == "ROLE_AGENT"
    assert [(m["messageId"], m["role"], m["parts"][0]["text"]) for m in d["history"]] == [
        ("m-1", "ROLE_USER", "question?"),
        ("r-1", "ROLE_AGENT", "first answer"),
        ("m-2", "ROLE_USER", "more?"),
        ("r-2", "ROLE_AGENT", "second answer"),
    ]
    assert all(m["taskId"] == "task-1" and m["contextId"] == "ctx-1" for m in d["history"])
    assert d["history"][1]["metadata"] == {"crosstalk": {"from": "bob"}}  # our namespace, as senders use it
    assert d["metadata"] == {"crosstalk": {"completion": "replied", "delivery": "accepted", "kind": "ask"}}


def test_metadata_omits_none_and_an_unreplied_task_has_no_status_message():
    d = MessageToDict(
        task_to_a2a(
            view(state=TaskState.FAILED, delivery=None, reason="rejected by policy", history=view().history[:1])
        )
    )
    assert d["metadata"] == {"crosstalk": {"reason": "rejected by policy", "kind": "ask"}}
    assert "message" not in d["status"]


@pytest.mark.parametrize(
    ("length", "kept"),
    [
        (None, ["m-1", "r-1", "m-2", "r-2"]),
        (0, []),
        (1, ["r-2"]),
        (3, ["r-1", "m-2", "r-2"]),
        (9, ["m-1", "r-1", "m-2", "r-2"]),
    ],
)
def test_history_length_trims_history_but_not_the_status_message(length, kept):
    task = task_to_a2a(view(), length)
    assert [m.message_id for m in task.history] == kept
    assert task.status.message.message_id == "r-2"


def test_task_error_codes_map_to_sdk_errors():
    cases = {
        TaskError.NOT_FOUND: TaskNotFoundError,
        TaskError.NOT_CANCELABLE: TaskNotCancelableError,
        TaskError.UNSUPPORTED: UnsupportedOperationError,
        TaskError.INVALID: InvalidRequestError,
        TaskError.INVALID_PARAMS: InvalidParamsError,
        "something_new": InternalError,
    }
    for code, cls in cases.items():
        err = task_error_to_a2a(TaskError(code, f"reason for {code}"))
        assert type(err) is cls
        if cls is not InternalError:
            assert err.message == f"reason for {code}"


def test_state_filter():
    assert state_filter_from_a2a(pb.TASK_STATE_UNSPECIFIED) == (True, None)
    assert state_filter_from_a2a(pb.TASK_STATE_WORKING) == (True, TaskState.WORKING)
    assert state_filter_from_a2a(pb.TASK_STATE_INPUT_REQUIRED) == (True, TaskState.INPUT_REQUIRED)
    assert state_filter_from_a2a(pb.TASK_STATE_AUTH_REQUIRED) == (False, None)
    assert state_filter_from_a2a(pb.TASK_STATE_REJECTED) == (False, None)


# ------------------------------------------------------------------ client side


def test_outbound_message_round_trips_through_the_server_translation():
    sent = new_message(
        "receiver",
        "hi there",
        from_="alice",
        kind="ask",
        delivery="steer",
        in_reply_to="m-0",
        context_id="ctx-5",
        deadline_seconds=45,
    )
    sent = sent.with_(hop_chain=(HOP,))
    wire = message_to_a2a(sent, task_id="task-7")
    assert wire.task_id == "task-7" and wire.role == pb.ROLE_USER
    back = message_from_a2a(wire, to="receiver", sender=ALICE)
    for name in (
        "message_id",
        "to",
        "from_",
        "kind",
        "delivery",
        "in_reply_to",
        "context_id",
        "deadline_seconds",
        "hop_chain",
        "text",
    ):
        assert getattr(back, name) == getattr(sent, name), name
    assert back.task_id == "task-7"


def test_outbound_plain_inform_metadata_is_minimal():
    wire = message_to_a2a(new_message("receiver", "x"))
    assert MessageToDict(wire.metadata) == {"crosstalk": {"kind": "inform", "delivery": "auto"}}
    assert wire.task_id == "" and wire.context_id == ""


def test_task_round_trip_keeps_what_travels():
    original = view(reason="answered")
    back = task_from_a2a(task_to_a2a(original))
    assert (back.task_id, back.context_id, back.kind, back.state, back.reason, back.delivery) == (
        "task-1",
        "ctx-1",
        "ask",
        TaskState.COMPLETED,
        "answered",
        "accepted",
    )
    assert back.history == original.history
    assert back.completion == original.completion == "replied"
    assert back.updated_at == pytest.approx(original.updated_at)
    assert back.creator == ""  # the caller is the creator; the id does not travel


def test_a_foreign_task_reads_sensibly():
    foreign = ParseDict(
        {
            "id": "t-x",
            "contextId": "c-x",
            "status": {
                "state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"messageId": "s-1", "role": "ROLE_AGENT", "parts": [{"text": "which one?"}]},
            },
            "artifacts": [{"artifactId": "a-1", "name": "echo", "parts": [{"text": "echo: hi"}, {"raw": "eA=="}]}],
        },
        pb.Task(),
    )
    got = task_from_a2a(foreign, kind="inform")
    assert got.state is TaskState.INPUT_REQUIRED and got.reason is None
    auth = task_from_a2a(pb.Task(id="t", status=pb.TaskStatus(state=pb.TASK_STATE_AUTH_REQUIRED)))
    assert (auth.state, auth.reason) == (TaskState.WORKING, "TASK_STATE_AUTH_REQUIRED")
    assert [(h.message_id, h.role, h.text) for h in got.history] == [
        ("s-1", "agent", "which one?"),
        ("a-1", "agent", "echo: hi"),
    ]
    assert got.kind == "inform"
    rejected = task_from_a2a(pb.Task(id="t", status=pb.TaskStatus(state=pb.TASK_STATE_REJECTED)))
    assert (rejected.state, rejected.reason) == (TaskState.FAILED, "rejected")


def test_a_direct_message_reply_reads_as_a_completed_view():
    sent = new_message("receiver", "ping?", context_id="c-1")
    reply = pb.Message(message_id="r", role=pb.ROLE_AGENT, parts=[pb.Part(text="pong")])
    got = reply_message_to_view(reply, sent)
    assert got.state is TaskState.COMPLETED and got.completion == "replied"
    assert [h.text for h in got.history] == ["ping?", "pong"] and got.context_id == "c-1"
