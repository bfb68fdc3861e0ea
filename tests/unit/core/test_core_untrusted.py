"""The one rule for untrusted JSON/YAML: bounded in size and depth before use; every violation one clear error."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core import untrusted
from crosstalk.core.errors import UntrustedInput
from crosstalk.core.untrusted import check_depth, json_depth, loads, text

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=20,
)


def depth_of(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


@given(JSON)
def test_the_raw_depth_is_the_parsed_depth_and_brackets_in_strings_do_not_count(value: object) -> None:
    raw = json.dumps(value).encode()
    assert json_depth(raw) == depth_of(value)
    assert loads(raw, what="x", max_bytes=1 << 20) == value


@pytest.mark.parametrize("levels", [65, 1000, 100_000])
def test_deep_nesting_is_one_clear_error_never_a_recursion_error(levels: int) -> None:
    for raw in ("[" * levels + "]" * levels, '{"a":' * levels + "1" + "}" * levels):
        with pytest.raises(UntrustedInput, match=r"^PLAN\.json: nested deeper than 64 levels$"):
            loads(raw, what="PLAN.json", max_bytes=1 << 20)


def test_size_and_syntax_are_named() -> None:
    with pytest.raises(UntrustedInput, match="larger than 10 bytes"):
        loads(b'"0123456789"', what="frame", max_bytes=10)
    with pytest.raises(UntrustedInput, match=r"^frame: not valid JSON"):
        loads(b"{nope", what="frame", max_bytes=100)
    assert loads('["[[[[", "\\"{"]', what="x", max_bytes=100, max_depth=1) == ["[[[[", '"{']


def test_parsed_values_are_checked_without_recursion_and_lone_surrogates_are_named() -> None:
    deep: list[object] = []
    cur = deep
    for _ in range(5000):
        cur.append([])
        cur = cur[0]  # type: ignore[assignment]
    with pytest.raises(UntrustedInput, match="nested deeper than 64"):
        check_depth(deep, what="workflow.yaml")
    shared = [list(range(100))] * 100
    with pytest.raises(UntrustedInput, match="more than 1000 values"):
        check_depth([shared] * 10, what="y", max_nodes=1000)
    assert text("fine ✓", what="t") == "fine ✓"
    with pytest.raises(UntrustedInput, match="lone surrogate at position 1"):
        text(loads('"a\\ud800"', what="t", max_bytes=100), what="send_message text")


def test_a_lone_bracket_inside_a_string_is_no_depth() -> None:
    assert json_depth(b'"{"') == 0 and json_depth(b'["["]') == 1


def test_a_document_with_few_brackets_is_parsed_without_the_depth_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Depth never exceeds the number of opening brackets: a journal line (a handful of them) skips the scan, which
    cost three times the parse itself and made a restart's replay and `crosstalk watch` slow on a big journal."""

    def scan(_raw: bytes) -> int:
        raise AssertionError("the depth scan ran")

    monkeypatch.setattr(untrusted, "json_depth", scan)
    line = b'{"type":"received","message":{"message_id":"m","parts":[{"type":"text","text":"[[[{{{"}]}}'
    assert untrusted.loads(line, what="line", max_bytes=1024, max_depth=16)["message"]["message_id"] == "m"
