"""The uds frame parser fed generated hostile lines: deep nesting (closed or not, arrays or objects, inside a real
frame), lines at and over the size limit, lone surrogates escaped or encoded. Every one is parsed or refused with
one FrameError naming the problem; nothing else escapes (no RecursionError, no UnicodeError)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.ingress.errors import FrameError
from crosstalk.ingress.frames import MAX_LINE_BYTES, AuthLine, UserLine, parse_answer, parse_line

USER = b'{"type":"user","message":{"role":"user","content":"hi"},"crosstalk":{"v":1,"x":'


def nested(depth: int, kind: str, closed: bool) -> bytes:
    if kind == "object":
        inner = b'{"a":' * depth + b"0" + (b"}" * depth if closed else b"")
    else:
        inner = b"[" * depth + (b"]" * depth if closed else b"")
    return inner


hostile = st.one_of(
    st.builds(nested, st.integers(1, 200_000), st.sampled_from(["array", "object"]), st.booleans()),
    st.builds(
        lambda d, k: USER + nested(d, k, True) + b"}}", st.integers(1, 5000), st.sampled_from(["array", "object"])
    ),
    st.integers(MAX_LINE_BYTES - 8, MAX_LINE_BYTES + 64).map(lambda n: b'{"type":"auth","token":"' + b"t" * n + b'"}'),
    st.sampled_from([b'"\\ud800"', b'{"type":"auth","token":"\\udfff"}', b'{"type":"auth","token":"\xed\xa0\x80"}']),
    st.builds(lambda s: USER + json.dumps(s).encode() + b"}}", st.text(alphabet=st.characters(), max_size=50)),
)


@settings(max_examples=150, deadline=None)
@given(hostile)
def test_hostile_lines_are_parsed_or_refused_with_one_frame_error(raw: bytes) -> None:
    try:
        parsed = parse_line(raw)
    except FrameError as exc:
        assert str(exc).startswith(("frame line", "user line", "auth line", "unknown frame", "'crosstalk'")), exc
        return
    assert isinstance(parsed, AuthLine | UserLine)
    assert len(raw) <= MAX_LINE_BYTES


@pytest.mark.parametrize("raw", [b"[" * 1000 + b"]" * 1000, USER + b"[" * 65 + b"]" * 65 + b"}}"])
def test_nesting_past_the_bound_names_the_depth(raw: bytes) -> None:
    with pytest.raises(FrameError, match="nested deeper than 64 levels"):
        parse_line(raw)


@settings(max_examples=80, deadline=None)
@given(hostile)
def test_hostile_answers_raise_only_frame_errors(raw: bytes) -> None:
    try:
        parse_answer(raw)
    except FrameError:
        pass


@given(st.text(alphabet=st.characters(codec=None, categories=("Cs", "Ll", "Nd", "Po")), max_size=12), st.booleans())
def test_the_surrogate_pre_check_fires_whenever_json_can_make_one(text: str, ascii_only: bool) -> None:
    """parse_line walks a frame's strings only when the line may hold a surrogate escape: it must never miss one."""
    from crosstalk.ingress.frames import _may_hold_surrogate

    line = json.dumps({"content": text}, ensure_ascii=ascii_only or any(0xD800 <= ord(c) <= 0xDFFF for c in text))
    if any(0xD800 <= ord(c) <= 0xDFFF for c in json.loads(line)["content"]):
        assert _may_hold_surrogate(line)
