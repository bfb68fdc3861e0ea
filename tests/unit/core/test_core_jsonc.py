"""core/jsonc.py is `json.dumps` / `json.loads` with their default arguments: the same text out, the same values in,
the same refusals (json's own errors, word for word), on random documents and on broken and odd ones."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core import jsonc

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too: json writes and reads them by default
    | st.text(max_size=12)  # lone surrogates included
)
JSON = st.recursive(
    SCALARS,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=25,
)
# Text near JSON: its punctuation, escapes, literals, whitespace, and any character.
NEAR = st.text(st.sampled_from('{}[]",:0123456789.eE+-\\u tfnrlsaNIy\t\n\r \x00\x7f\ud800é\ufeff'), max_size=30)


def same(a: object, b: object) -> bool:
    """Equal, with NaN equal to NaN (json.loads("NaN") != itself)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def outcome(fn: object, arg: object) -> tuple[str, object]:
    try:
        return "ok", fn(arg)  # type: ignore[operator]
    except Exception as exc:  # the error, as its type and words
        return type(exc).__name__, str(exc)


@given(JSON, st.booleans())
def test_dumps_is_json_dumps(value: object, ensure_ascii: bool) -> None:
    assert jsonc.dumps(value, ensure_ascii=ensure_ascii) == json.dumps(value, ensure_ascii=ensure_ascii)


@given(JSON, st.booleans(), st.sampled_from(["", " ", "\n", " \t\r\n"]))
def test_round_trip_is_json_loads(value: object, ensure_ascii: bool, pad: str) -> None:
    text = pad + json.dumps(value, ensure_ascii=ensure_ascii) + pad
    assert same(jsonc.loads(text), json.loads(text))
    raw = text.encode("utf-8", "surrogatepass")
    assert same(jsonc.loads(raw), json.loads(raw))
    assert same(jsonc.loads(raw), value)


@given(NEAR | st.text(max_size=30))
def test_any_text_parses_or_fails_as_json_does(text: str) -> None:
    ours, theirs = outcome(jsonc.loads, text), outcome(json.loads, text)
    assert ours[0] == theirs[0]
    assert same(ours[1], theirs[1]) if ours[0] == "ok" else ours == theirs


@given(st.binary(max_size=24) | NEAR.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_bytes_parse_or_fail_as_json_does(raw: bytes) -> None:
    ours, theirs = outcome(jsonc.loads, raw), outcome(json.loads, raw)
    assert ours[0] == theirs[0]
    assert same(ours[1], theirs[1]) if ours[0] == "ok" else ours == theirs


@pytest.mark.parametrize(
    "doc",
    ["", " ", "1 2", "[1,]", '{"a" 1}', "\ufeff1", b"\xef\xbb\xbf[1]", '"\\ud800"', "NaN", "-Infinity", "01",
     '"a\nb"', '{"a": 1, "a": 2}', "[" * 200 + "]" * 200, '"\\u00e9"', b'"\xff"', "1.5e400", b"\x00\x001\x00"],
)  # fmt: skip
def test_edges_as_json(doc: str | bytes) -> None:
    ours, theirs = outcome(jsonc.loads, doc), outcome(json.loads, doc)
    assert ours[0] == theirs[0]
    assert same(ours[1], theirs[1]) if ours[0] == "ok" else ours == theirs


def test_values_json_cannot_hold_are_jsons_errors() -> None:
    for value in ({"a": object()}, {(1, 2): 3}, b"x", {1j}):
        assert outcome(jsonc.dumps, value) == outcome(json.dumps, value)
    loop: list[object] = []
    loop.append(loop)
    assert outcome(jsonc.dumps, loop) == outcome(json.dumps, loop)
    assert jsonc.dumps([1]) == "[1]"  # a refusal leaves nothing behind for the next call
    assert outcome(jsonc.loads, 3) == outcome(json.loads, 3)


def test_str_subclasses_and_enum_members_encode_as_their_text() -> None:
    from crosstalk.core.states import State

    assert jsonc.dumps({"state": State.ACCEPTED, State.HELD: [State.QUEUED]}) == json.dumps(
        {"state": "accepted", "held": ["queued"]}
    )
