"""A2A across the relay, the pure parts: the task request and its answer (relay/a2a_wire.py, wire.py
decode_answer), and who owns a task (tasks/owners.py)."""

from __future__ import annotations

import json

import pytest

from crosstalk.core.message import new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.relay.a2a_wire import (
    encode_task_answer,
    encode_task_error,
    encode_task_request,
    task_params,
    task_request_of,
)
from crosstalk.relay.errors import FrameError
from crosstalk.relay.wire import decode_answer, decode_request, parse_frame
from crosstalk.tasks.owners import task_owner, via


def test_a_task_request_is_readdressed_and_labelled_by_the_subjects_machine() -> None:
    msg = new_message("bob@gpu", "which CUDA?", from_="alice", kind="ask", deadline_seconds=60)
    frame = parse_frame(encode_task_request(msg, return_immediately=True, task_id="t-1"))
    req = task_request_of(frame, "gpu", "laptop")
    assert (req.message.to, req.message.from_, req.message.kind.value) == ("bob", "@relay:laptop/alice", "ask")
    assert (req.message.deadline_seconds, req.return_immediately, req.task_id) == (60, True, "t-1")
    assert req.message.message_id == msg.message_id


def test_an_older_relay_process_refuses_a_task_rather_than_deliver_it_as_a_message() -> None:
    msg = new_message("bob@gpu", "hi", from_="alice")
    with pytest.raises(FrameError, match="no message object"):
        decode_request(encode_task_request(msg, return_immediately=False, task_id=None), "gpu", "laptop")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"from": "@cli:ann"}, "must be an agent"),  # a command line has no way back: it owns no task
        ({"to": "bob@laptop"}, "not to NAME@gpu"),
        ({"kind": "bogus"}, "invalid message"),
    ],
)
def test_a_bad_task_request_is_a_frame_error(change: dict, problem: str) -> None:
    msg = new_message("bob@gpu", "hi", from_="alice")
    frame = parse_frame(encode_task_request(msg, return_immediately=False, task_id=None))
    frame["task"]["message"].update(change)
    with pytest.raises(FrameError, match=problem):
        task_request_of(frame, "gpu", "laptop")


def test_task_params_are_checked() -> None:
    assert task_params({"return_immediately": True}) == {"return_immediately": True, "task_id": None}
    for bad in ([], {"return_immediately": "yes"}, {"task_id": ""}, {"task_id": 7}):
        with pytest.raises(ValueError):
            task_params(bad)


def test_task_answers_decode() -> None:
    view = {"task_id": "t", "state": "completed", "answer": None}
    got = decode_answer(encode_task_answer(view, "bob", "a1"))
    assert (got.task, got.to, got.agent_id, got.outcome) == (view, "bob", "a1", None)
    err = decode_answer(encode_task_error("invalid_request", "no", "bob", "a1"))
    assert err.task_error == {"kind": "invalid_request", "message": "no"} and err.task is None
    with pytest.raises(FrameError):
        decode_answer(json.dumps({"v": 1, "task": "x", "to": "bob", "agent_id": "a1"}).encode())


def test_a_task_is_owned_by_a_verified_agent_or_a_relayed_one_only() -> None:
    assert task_owner(Sender(SenderClass.VERIFIED, "a1", "alice", "a2a")) == "a1"
    relayed = Sender(SenderClass.EXTERNAL, None, "@relay:laptop/alice", "relay")
    assert (task_owner(relayed), via(relayed)) == ("@relay:laptop/alice", "relay")
    assert task_owner(Sender(SenderClass.EXTERNAL, None, "@relay:laptop/alice", "uds")) == ""  # not the relay's
    assert task_owner(Sender(SenderClass.EXTERNAL, None, "@ci:build", "relay")) == ""
    assert task_owner(Sender(SenderClass.UNVERIFIED, None, "x", "uds")) == ""
