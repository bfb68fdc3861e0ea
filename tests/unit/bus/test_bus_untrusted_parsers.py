"""The bus's parsers of files others commit (message front matter, CHANNEL.md and registry YAML through load_yaml, a
workflow's PLAN.json and compile answer) under deep, huge and hostile YAML and JSON: each one answers with its own
error naming the input, never a RecursionError or any other exception, and never builds a value deeper than the
one rule for untrusted input (crosstalk.core.untrusted) allows."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.bus.errors import MessageFormatError, PlanError
from crosstalk.bus.protocol import safefs
from crosstalk.bus.protocol.message import MAX_BODY_BYTES, fit_body, lenient_fields, parse_message
from crosstalk.bus.protocol.safefs import MAX_YAML_CHARS, load_yaml
from crosstalk.bus.workflow.plan import MAX_PLAN_BYTES, Plan, parse_plan_json, parse_plan_output
from crosstalk.core.errors import UntrustedInput
from crosstalk.core.untrusted import MAX_DEPTH, check_depth

HEADER = "from: alice\nto: local/echo\ntimestamp: 2026-11-29T23:51:20.913Z\n"


def nested(style: str, depth: int, leaf: str = "x") -> str:
    """A value nesting `depth` levels in one of the ways YAML or JSON can."""
    if style == "flow_list":
        return "[" * depth + leaf + "]" * depth
    if style == "flow_map":
        return "{a: " * depth + leaf + "}" * depth
    if style == "json_map":
        return '{"a": ' * depth + f'"{leaf}"' + "}" * depth
    # block mappings, one indentation level per nesting level
    return "\n" + "".join(" " * i + "k:\n" for i in range(1, depth)) + " " * depth + f"k: {leaf}"


STYLES = st.sampled_from(["flow_list", "flow_map", "json_map", "block_map"])
DEPTHS = st.one_of(st.integers(1, 80), st.integers(900, 1001), st.integers(1002, 5000))
JUNK = st.text(alphabet=st.sampled_from("[]{}:,-&*!|>'\"\n #ab1"), max_size=40)


def _check(value: object) -> None:
    check_depth(value, what="the result")  # whatever was built is within the rule


@settings(max_examples=60, deadline=None)
@given(style=STYLES, depth=DEPTHS, junk=JUNK, strings_only=st.booleans())
def test_load_yaml_refuses_deep_documents_with_its_own_errors(style, depth, junk, strings_only) -> None:
    doc = f"field: {nested(style, depth)}{junk}"
    try:
        value = load_yaml(doc, "front matter", strings_only=strings_only)
    except UntrustedInput as exc:
        assert exc.what == "front matter" and "deeper than" in exc.problem
    except (yaml.YAMLError, ValueError, TypeError):
        pass
    else:
        _check(value)
        assert depth < MAX_DEPTH


def test_the_pure_python_loader_recursing_too_deep_is_untrusted_input_too(monkeypatch) -> None:
    monkeypatch.setattr(safefs, "_Loader", yaml.SafeLoader)  # a machine without libyaml
    with pytest.raises(UntrustedInput, match="front matter: nested deeper than"):
        load_yaml(f"a: {nested('flow_list', 990)}", "front matter")


@settings(max_examples=60, deadline=None)
@given(style=STYLES, depth=DEPTHS, field=st.sampled_from(["failed", "re", "as", "to", "extra"]), junk=JUNK)
def test_a_message_with_deep_front_matter_is_a_message_format_error(style, depth, field, junk) -> None:
    text = f"---\n{HEADER}{field}: {nested(style, depth)}{junk}\n---\n\nbody\n"
    try:
        parse_message(text, where="m.md")
    except MessageFormatError as exc:
        assert exc.message.startswith("m.md")
    lenient = lenient_fields(text)  # never raises; the one-line fields are still read when the rest is hostile
    if field in ("failed", "extra", "as"):
        assert lenient.get("from") == "alice"


def test_an_alias_bomb_and_a_huge_document_are_refused_before_they_are_built() -> None:
    bomb = 'a: &a ["x","x"]\nb: &b [*a,*a]\nc: &c [*b,*b]\n'
    with pytest.raises(yaml.YAMLError, match="aliases"):
        load_yaml(bomb, "front matter")
    with pytest.raises(yaml.YAMLError, match="over"):
        load_yaml("a: " + "x" * (MAX_YAML_CHARS + 1), "front matter")


@settings(max_examples=60, deadline=None)
@given(style=STYLES, depth=DEPTHS, junk=JUNK)
def test_a_deep_compile_answer_or_plan_json_is_a_plan_error(style, depth, junk) -> None:
    inner = nested(style if style != "flow_map" else "json_map", depth, '"x"' if style == "flow_list" else "x")
    answer = f'Here it is: {{"fanout": {inner}, "synthesize": {{}}}}{junk}'
    with pytest.raises(PlanError):
        parse_plan_output(answer)
    with pytest.raises(PlanError) as info:
        parse_plan_json(inner.encode(), "PLAN.json")
    if depth > MAX_DEPTH:  # refused as input (naming it) before anything looks at its shape
        assert info.value.message.startswith("PLAN.json: ")
        assert info.value.message.endswith((f"nested deeper than {MAX_DEPTH} levels", ")")), info.value.message


def test_a_plan_over_its_size_cap_is_refused_and_a_good_one_still_reads() -> None:
    good = '{"fanout": {"to": "a", "count": 2, "body": "b"}, "synthesize": {"to": "c", "body": "d"}}'
    assert isinstance(parse_plan_output(f"```json\n{good}\n```"), Plan)
    with pytest.raises(PlanError, match="larger than"):
        parse_plan_json(" " * MAX_PLAN_BYTES + good, "PLAN.json")
    with pytest.raises(PlanError, match="count"):
        parse_plan_output(good.replace('"count": 2', '"count": "' + "9" * 100_000 + '"'))


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), limit=st.integers(0, 400))
def test_fit_body_cuts_on_a_character_boundary_and_counts_the_cut(text, limit) -> None:
    data = text.encode("utf-8", errors="replace")
    kept, dropped = fit_body(text, limit)
    assert len(kept.encode()) <= max(limit, 0) or dropped == 0
    if dropped:
        assert data.startswith(kept.encode()) and dropped == len(data) - limit
    else:
        assert kept == text and len(data) <= limit


def test_fit_body_default_is_what_a_reply_may_hold() -> None:
    kept, dropped = fit_body("\ufffd" * MAX_BODY_BYTES)  # 3 bytes each once encoded
    assert len(kept.encode()) <= MAX_BODY_BYTES and dropped == 2 * MAX_BODY_BYTES
