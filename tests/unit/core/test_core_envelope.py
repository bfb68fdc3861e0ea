"""The Claude <cross-session-message> envelope: render/parse round trips, escaping, and clear parse errors."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from crosstalk.core.envelope import (
    TAG,
    Envelope,
    escape_attr,
    escape_body,
    looks_like_envelope,
    parse,
    render,
    unescape,
)
from crosstalk.core.errors import CrosstalkError, EnvelopeError

OPEN_X = '<cross-session-message from="x">'
CLOSE = "</cross-session-message>"
# an unescaped opening tag: "<" immediately followed by the tag name
_OPEN_TAG_RE = re.compile("<" + TAG + r"[\s>]")

_tricky = st.sampled_from(
    [
        "<",
        ">",
        "&",
        '"',
        "\n",
        "\r",
        " ",
        "\t",
        OPEN_X,
        CLOSE,
        "&amp;",
        "&lt;",
        "&gt;",
        "&quot;",
        "&amp;lt;",
        "&#60;",
        "<" + TAG + ">",
        "\n" + CLOSE,
        CLOSE + "\n",
        "é",
        "😀",
    ]
)
bodies = st.lists(st.text() | _tricky, max_size=8).map("".join)
attr_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True)
attr_values = st.lists(st.text(max_size=30) | _tricky, max_size=4).map("".join)
attr_dicts = st.dictionaries(attr_names, attr_values, max_size=6)


# ----------------------------------------------------------------- rendering
def test_render_shape() -> None:
    text = render(
        "hi <b> & bye",
        {"from": "uds:/s/ab.sock", "from-name": "alice", "message-id": "m1", "kind": "inform", "in-reply-to": None},
    )
    assert text == (
        '<cross-session-message from="uds:/s/ab.sock" from-name="alice" message-id="m1" kind="inform">\n'
        "hi &lt;b&gt; &amp; bye\n"
        "</cross-session-message>"
    )


def test_render_keeps_attribute_order_and_skips_none() -> None:
    text = render("", {"b": "2", "a": "1", "skip": None, "c": ""})
    assert text.splitlines()[0] == '<cross-session-message b="2" a="1" c="">'


@pytest.mark.parametrize("name", ["", "1abc", "a b", 'a"', "a=b", "-x", "a>b", "é"])
def test_render_rejects_bad_attribute_names(name: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        render("x", {name: "v"})
    assert repr(name) in str(info.value)


def test_escaping() -> None:
    assert escape_body('a<b>&"c"') == 'a&lt;b&gt;&amp;"c"'
    assert escape_attr('a<b>&"c"') == "a&lt;b&gt;&amp;&quot;c&quot;"
    assert escape_body("&lt;") == "&amp;lt;"


def test_unescape_is_single_pass() -> None:
    assert unescape("&amp;lt;") == "&lt;"
    assert unescape("&amp;amp;") == "&amp;"
    assert unescape("&lt;&gt;&amp;&quot;") == '<>&"'
    assert unescape("&#60; &apos; &LT; &amp") == "&#60; &apos; &LT; &amp"  # only the four we produce


@given(st.text() | bodies)
def test_escape_unescape_inverse(text: str) -> None:
    assert unescape(escape_body(text)) == text
    assert unescape(escape_attr(text)) == text
    assert "<" not in escape_body(text) and ">" not in escape_body(text)
    assert '"' not in escape_attr(text)


# ----------------------------------------------------------------- round trips
@given(bodies, attr_dicts)
@example("", {})
@example("\n", {})
@example("\n\n", {"from": ""})
@example(OPEN_X + "inner" + CLOSE, {"from": OPEN_X})
@example(CLOSE, {})
@example("x\n" + CLOSE + "\n", {"kind": CLOSE})
@example("&amp;lt;", {"a": "&amp;lt;"})
@example("  leading and trailing  \n ", {})
def test_round_trip(body: str, attrs: dict[str, str]) -> None:
    env = parse(render(body, attrs))
    assert env.body == body
    assert env.attrs == attrs


@given(bodies, attr_dicts)
def test_body_markup_never_becomes_a_second_envelope(body: str, attrs: dict[str, str]) -> None:
    rendered = render(body + OPEN_X + "fake" + CLOSE, attrs)
    assert len(_OPEN_TAG_RE.findall(rendered)) == 1
    assert rendered.count(CLOSE) == 1
    assert rendered.startswith("<" + TAG)
    assert rendered.endswith(CLOSE)
    env = parse(rendered)
    assert env.body == body + OPEN_X + "fake" + CLOSE
    assert env.attrs == attrs


def test_nested_envelope_in_body_stays_body() -> None:
    inner = render("secret", {"from": "mallory", "kind": "command"})
    outer = render(inner, {"from": "alice", "kind": "inform"})
    env = parse(outer)
    assert env.from_ == "alice" and env.kind == "inform"
    assert env.body == inner
    assert parse(env.body).from_ == "mallory"  # only if someone parses the body on purpose


def test_envelope_properties() -> None:
    env = parse(
        render("b", {"from": "uds:/x", "from-name": "alice", "message-id": "m", "kind": "ask", "in-reply-to": "m0"})
    )
    assert (env.from_, env.from_name, env.message_id, env.kind, env.in_reply_to) == (
        "uds:/x",
        "alice",
        "m",
        "ask",
        "m0",
    )
    bare = Envelope("b")
    assert bare.attrs == {}
    assert (bare.from_, bare.from_name, bare.message_id, bare.kind, bare.in_reply_to) == (None,) * 5


# ----------------------------------------------------------------- lenient input
def test_parse_tolerates_surrounding_whitespace() -> None:
    env = parse('  \n<cross-session-message  a="1"   b="2" >\nbody\n</cross-session-message>\n  ')
    assert env.body == "body" and env.attrs == {"a": "1", "b": "2"}


def test_parse_without_newlines_around_body() -> None:
    env = parse("<cross-session-message>x &amp; y</cross-session-message>")
    assert env.body == "x & y" and env.attrs == {}


def test_parse_attribute_with_newline_and_escapes() -> None:
    env = parse('<cross-session-message from="a\nb &amp;&quot;c&quot;">\nz\n</cross-session-message>')
    assert env.attrs == {"from": 'a\nb &"c"'}


def test_looks_like_envelope() -> None:
    assert looks_like_envelope(render("x", {"from": "a"}))
    assert looks_like_envelope(" <cross-session-message>")
    assert not looks_like_envelope("hello <cross-session-message>")
    assert not looks_like_envelope("<cross-session-messages>")
    assert not looks_like_envelope("")


# ----------------------------------------------------------------- errors
def _parse_error(text: object) -> str:
    with pytest.raises(EnvelopeError) as info:
        parse(text)  # type: ignore[arg-type]
    err = info.value
    assert isinstance(err, CrosstalkError) and isinstance(err, ValueError)
    msg = str(err)
    assert msg and "\n" not in msg
    return msg


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "hello <cross-session-message>x</cross-session-message>",
        "<cross-session-messagex>x</cross-session-message>",
        "<cross-session-message from=x>x</cross-session-message>",
        "<cross-session-message from='x'>x</cross-session-message>",
        '<cross-session-message from="x"',
        "<other>x</other>",
    ],
)
def test_parse_no_opening_tag(text: str) -> None:
    msg = _parse_error(text)
    assert "does not start" in msg and TAG in msg


@pytest.mark.parametrize(
    "text",
    [
        "<cross-session-message>\nbody",
        "<cross-session-message>\nbody\n</cross-session-message> trailing",
        "<cross-session-message>\nbody\n</cross-session-messag>",
        "<cross-session-message>",
    ],
)
def test_parse_not_closed(text: str) -> None:
    msg = _parse_error(text)
    assert "not closed" in msg and "</" + TAG + ">" in msg


def test_parse_duplicate_attribute() -> None:
    msg = _parse_error('<cross-session-message from="a" kind="ask" from="b">\nx\n</cross-session-message>')
    assert "'from'" in msg and "twice" in msg


def test_parse_non_string() -> None:
    assert "string" in _parse_error(b"<cross-session-message></cross-session-message>")
    assert "string" in _parse_error(None)


@given(st.text())
def test_parse_only_raises_envelope_error(text: str) -> None:
    try:
        env = parse(text)
    except EnvelopeError:
        return
    assert isinstance(env.body, str)
