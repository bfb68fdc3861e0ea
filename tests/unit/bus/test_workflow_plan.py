"""The compile pass's answer, read strictly (bus/workflow/plan.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.bus.errors import PlanError
from crosstalk.bus.workflow.plan import MAX_COUNT, Plan, compile_prompt, parse_plan_output

GOOD = {"fanout": {"to": "sonnet", "count": 3, "body": "Draft it."}, "synthesize": {"to": "p/opus", "body": "Pick."}}


def test_a_plan_in_a_fence_with_prose_around_it_is_read() -> None:
    plan = parse_plan_output("Here you go:\n```json\n" + json.dumps(GOOD) + "\n```\nGood luck.")
    assert plan.fanout.to == "sonnet" and plan.fanout.count == 3 and plan.synthesize.to == "p/opus"
    assert Plan.from_dict(plan.to_dict()) == plan


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"extra": 1}, "exactly the keys fanout and synthesize"),
        ({"fanout": {**GOOD["fanout"], "count": 0}}, "count must be a whole number from 1"),
        ({"fanout": {**GOOD["fanout"], "count": MAX_COUNT + 1}}, "count must be a whole number from 1"),
        ({"fanout": {**GOOD["fanout"], "count": True}}, "count must be a whole number"),
        ({"fanout": {**GOOD["fanout"], "count": 2.0}}, "count must be a whole number"),
        ({"fanout": {**GOOD["fanout"], "to": "a@machine"}}, "must be a model name"),
        ({"fanout": {**GOOD["fanout"], "to": "../x"}}, "must be a model name"),
        ({"synthesize": {"to": "opus", "body": "  "}}, "body must be non-empty"),
        ({"synthesize": {"to": "opus", "body": "x", "count": 2}}, "exactly the keys body, to"),
        ({"fanout": "three drafts"}, "exactly the keys body, count, to"),
    ],
)
def test_a_bad_plan_is_refused_naming_the_problem(change: dict, error: str) -> None:
    with pytest.raises(PlanError, match=error):
        Plan.from_dict({**GOOD, **change})


@pytest.mark.parametrize("text", ["", "no json here", "{not json}", "[1, 2]", '{"fanout": 1'])
def test_an_answer_without_a_plan_is_refused(text: str) -> None:
    with pytest.raises(PlanError):
        parse_plan_output(text)


@given(st.text(max_size=400))
def test_any_answer_is_a_plan_or_one_plan_error(text: str) -> None:
    try:
        assert isinstance(parse_plan_output(text), Plan)
    except PlanError:
        pass


def test_the_compile_prompt_carries_the_prose_and_the_models() -> None:
    prompt = compile_prompt("  Fan out 3 drafts using sonnet.  ", ["p/sonnet", "p/opus"])
    assert "Fan out 3 drafts using sonnet." in prompt and "p/sonnet, p/opus" in prompt and '"fanout"' in prompt
