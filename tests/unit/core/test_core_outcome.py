"""The delivery answer record: to_dict/from_dict round-trip every record, from_dict refuses anything else, and the
flat answer a model reads carries the record's fields and only the evidence it shows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.states import DELIVERED_STATES, ERROR_STATES, Outcome, Reason, State, parse_reason

texts = st.text(min_size=1, max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
outcomes = st.builds(
    Outcome,
    message_id=st.text(max_size=20),
    state=st.sampled_from(list(State)),
    reason=st.none() | st.sampled_from(list(Reason)) | texts,
    evidence=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    task_id=st.none() | texts,
)


@given(outcomes)
def test_the_record_round_trips(outcome: Outcome) -> None:
    back = Outcome.from_dict(outcome.to_dict())
    assert back == outcome
    assert back.to_dict() == outcome.to_dict()
    if isinstance(outcome.reason, Reason):
        assert back.reason is outcome.reason  # crosstalk's own reasons come back as the enum


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        "accepted",
        {"state": "accepted"},  # no message_id
        {"message_id": "m"},  # no state
        {"message_id": 1, "state": "accepted"},
        {"message_id": "m", "state": "delivered"},  # not a state
        {"message_id": "m", "state": "ACCEPTED"},  # a member's name is not its value
        {"message_id": "m", "state": "accepted", "reason": 3},
        {"message_id": "m", "state": "accepted", "reason": ""},
        {"message_id": "m", "state": "accepted", "task_id": 7},
        {"message_id": "m", "state": "accepted", "task_id": ""},
        {"message_id": "m", "state": "accepted", "evidence": []},
        {"message_id": "m", "state": "accepted", "evidence": {1: True}},
        {"message_id": "m", "state": "accepted", "extra": True},  # unknown field
    ],
)
def test_from_dict_is_strict(data: Any) -> None:
    with pytest.raises(ValueError):
        Outcome.from_dict(data)


def test_the_answer_a_model_reads() -> None:
    native = Outcome("m1", State.HELD, "held: for its user", {"native": True, "msg_id": "m1", "hint": "wait"})
    assert native.answer(to="bob") == {
        "state": "held",
        "reason": "held: for its user",
        "message_id": "m1",
        "native": True,
        "hint": "wait",
        "to": "bob",
    }
    replied = Outcome("m2", State.REPLIED, task_id="t2", evidence={"claude": "receipt"})
    assert replied.answer(reply="yes", to="carol", detail=None) == {
        "state": "replied",
        "message_id": "m2",
        "task_id": "t2",
        "reply": "yes",
        "to": "carol",
    }
    assert Outcome("", State.UNBOUND, Reason.SHUTTING_DOWN).answer() == {"state": "unbound", "reason": "shutting_down"}


def test_the_vocabulary() -> None:
    assert {"accepted", "queued"} == DELIVERED_STATES
    assert Outcome("m", State.QUEUED).delivered and not Outcome("m", State.HELD).delivered
    assert {"unbound", "invalid_arguments", "rejected", "unreachable", "error", "expired"} == ERROR_STATES
    assert parse_reason("deadline_passed") is Reason.DEADLINE_PASSED
    assert parse_reason("acl:agents") == "acl:agents" and parse_reason(None) is None
