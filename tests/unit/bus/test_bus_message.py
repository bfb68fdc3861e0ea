"""Message front matter: parse/render, normalisation of YAML 1.1 scalars, rejection rules, file names."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.bus.errors import MessageFormatError
from crosstalk.bus.protocol.message import (
    MESSAGE_NAME_RE,
    BusMessage,
    new_message_name,
    parse_message,
    render_message,
    utc_timestamp,
)

SEED_EXAMPLE = """---
from: alice
to: sonnet@cachy
timestamp: 2026-06-11T19:00:00.000Z
---

Message body here.
"""


def test_parses_the_protocol_example() -> None:
    msg = parse_message(SEED_EXAMPLE)
    assert msg == BusMessage(
        sender="alice", to="sonnet@cachy", timestamp="2026-06-11T19:00:00.000Z", body="Message body here."
    )


def test_all_fields_and_unknown_fields_ignored() -> None:
    text = (
        "---\nfrom: anthropic/sonnet@m1\nto: alice\ntimestamp: '2026-06-11T19:00:00.123Z'\n"
        "re:\n  - 2026/06/11/190000123Z-0123456789abcdef.md\n  - 2026/06/11/190000124Z-0123456789abcdee.md\n"
        "as: critic\nwake_as: lead\nchild_channel: 0b8e3a52-8d6e-4c7e-9a51-0f3b2f8f3d10\nfailed: true\n"
        "error: exit 2\nfanout: 2/3\ndispatch_host: m1\nfuture_field: [1, 2]\n---\n\nbody\n"
    )
    msg = parse_message(text)
    assert msg.re == ("2026/06/11/190000123Z-0123456789abcdef.md", "2026/06/11/190000124Z-0123456789abcdee.md")
    assert (msg.as_, msg.wake_as, msg.failed, msg.error, msg.fanout) == ("critic", "lead", True, "exit 2", "2/3")
    assert msg.child_channel == "0b8e3a52-8d6e-4c7e-9a51-0f3b2f8f3d10"


def test_re_single_string_and_render_shape() -> None:
    msg = BusMessage(sender="a", to="b", timestamp="2026-06-11T19:00:00.000Z", re=("2026/06/11/x.md",), body="hi")
    text = render_message(msg)
    assert text.startswith("---\nfrom: a\nto: b\n")
    assert "re: 2026/06/11/x.md\n" in text
    assert text.endswith("---\n\nhi\n")
    two = render_message(BusMessage(sender="a", to="b", timestamp="t", re=("x.md", "y.md")))
    assert "re:\n- x.md\n- y.md\n" in two
    assert parse_message(two).re == ("x.md", "y.md")


def test_yaml_11_scalars_come_back_as_strings() -> None:
    text = "---\nfrom: yes\nto: 42\ntimestamp: 2026-06-11T19:00:00.5Z\nas: 2026-01-02\nerror: 1.5\n---\n"
    msg = parse_message(text)
    assert (msg.sender, msg.to, msg.timestamp, msg.as_, msg.error) == (
        "true",
        "42",
        "2026-06-11T19:00:00.500Z",
        "2026-01-02",
        "1.5",
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("no front matter\n", "no front matter"),
        ("---\nfrom: a\n", "not closed"),
        ("---\n- a\n---\n", "mapping"),
        ("---\nto: b\ntimestamp: t\n---\n", "field 'from' is required"),
        ("---\nfrom: ''\nto: b\ntimestamp: t\n---\n", "field 'from' must not be empty"),
        ("---\nfrom: a\nto: [b]\ntimestamp: t\n---\n", "field 'to' must be a string"),
        ("---\nfrom: a\nto: b\ntimestamp: t\ntype: text\n---\n", "type: 'text' is not valid in protocol v7"),
        ("---\nfrom: a\nto: b\ntimestamp: t\nfailed: 'yes'\n---\n", "field 'failed' must be true or false"),
        ("---\nfrom: a\nto: b\ntimestamp: t\nre: ../x.md\n---\n", "unsafe path"),
        ("---\nfrom: a\nto: b\ntimestamp: t\nre: /etc/x.md\n---\n", "unsafe path"),
        ("---\nfrom: a\nto: b\ntimestamp: t\nre: [[x]]\n---\n", "path or a list"),
        ("---\nfrom: a\nto: b\ntimestamp: t\nfanout: 4/3\n---\n", "field 'fanout'"),
        ("---\nfrom: a\nto: b\ntimestamp: 2026-13-45\n---\n", "not valid YAML"),
        ("---\nfrom: [a\n---\n", "not valid YAML"),
    ],
)
def test_rejections_name_the_problem(text: str, why: str) -> None:
    with pytest.raises(MessageFormatError) as info:
        parse_message(text, where="data/channels/u/x.md")
    assert why in info.value.message
    assert "\n" not in info.value.message


def test_type_workflow_is_accepted() -> None:
    assert parse_message("---\nfrom: a\nto: workflow\ntimestamp: t\ntype: workflow\n---\n").type == "workflow"


def test_names_and_timestamps() -> None:
    now = dt.datetime(2026, 6, 11, 19, 0, 0, 123456, tzinfo=dt.UTC)
    assert utc_timestamp(now) == "2026-06-11T19:00:00.123Z"
    name = new_message_name(now)
    assert name.startswith("2026/06/11/190000123Z-") and MESSAGE_NAME_RE.match(name)
    assert len({new_message_name(now) for _ in range(200)}) == 200


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
_word = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc", "Zl", "Zp")), min_size=1, max_size=30)
_rel = st.lists(st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True), min_size=1, max_size=4).map("/".join)


@st.composite
def messages(draw: st.DrawFn) -> BusMessage:
    n = draw(st.integers(1, 2))
    k = draw(st.integers(1, n))
    return BusMessage(
        sender=draw(_word),
        to=draw(_word),
        timestamp=draw(_word),
        re=tuple(draw(st.lists(_rel, max_size=3))),
        as_=draw(st.none() | _text),
        wake_as=draw(st.none() | _text),
        child_channel=draw(st.none() | _text),
        type=draw(st.sampled_from([None, "workflow"])),
        failed=draw(st.booleans()),
        error=draw(st.none() | _text),
        fanout=draw(st.none() | st.just(f"{k}/{n}")),
        body=draw(_text),
    )


@settings(max_examples=300, deadline=None)
@given(messages())
def test_render_parse_round_trip(msg: BusMessage) -> None:
    assert parse_message(render_message(msg)) == msg


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300) | st.builds(lambda a, b: f"---\n{a}\n---\n{b}", st.text(max_size=200), _text))
def test_parse_only_ever_raises_message_format_error(text: str) -> None:
    try:
        parse_message(text)
    except MessageFormatError as exc:
        assert "\n" not in exc.message
