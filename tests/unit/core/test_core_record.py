"""core/record.py: the records on `crosstalk send`'s path behave as the frozen slotted dataclasses they replace."""

from __future__ import annotations

import copy
import pickle

import pytest

from crosstalk.core.message import new_message
from crosstalk.core.states import Outcome, State
from crosstalk.registry.paths import StatePaths

pytestmark = pytest.mark.unit


def test_equality_and_hash_are_over_the_fields_and_the_class() -> None:
    a = Outcome("m", State.ACCEPTED, "r", {}, "t")
    assert a == Outcome("m", State.ACCEPTED, "r", {}, "t")
    assert a != Outcome("m", State.ACCEPTED, "r", {}, None)
    assert a != ("m", State.ACCEPTED, "r", {}, "t")
    msg = new_message("bob", "hi")
    assert hash(msg) == hash(copy.copy(msg))
    assert len({StatePaths.from_env({"CROSSTALK_HOME": "/tmp/x"}) for _ in range(3)}) == 1


def test_defaults_and_repr() -> None:
    out = Outcome("m", State.QUEUED)
    assert (out.reason, out.evidence, out.task_id) == (None, {}, None)
    assert Outcome("n", State.QUEUED).evidence is not out.evidence  # a fresh dict each, as default_factory gave
    assert (
        repr(out) == "Outcome(message_id='m', state=<State.QUEUED: 'queued'>, reason=None, evidence={}, task_id=None)"
    )


def test_a_record_cannot_be_changed_only_copied_with_changes() -> None:
    out = Outcome("m", State.HELD, "held for its user")
    with pytest.raises(AttributeError):
        out.state = State.ACCEPTED  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del out.reason
    later = out.with_(state=State.ACCEPTED, reason=None)
    assert (later.message_id, later.state, later.reason) == ("m", State.ACCEPTED, None)
    assert out.state is State.HELD
    with pytest.raises(TypeError):
        out.with_(colour="red")


def test_copy_deepcopy_and_pickle_rebuild_an_equal_record() -> None:
    out = Outcome("m", State.ACCEPTED, None, {"proof": [1, 2]})
    deep = copy.deepcopy(out)
    assert deep == out and deep.evidence is not out.evidence
    msg = new_message("bob", "hello", from_="@ci:build")
    assert pickle.loads(pickle.dumps(msg)) == msg
    assert copy.copy(msg) == msg
