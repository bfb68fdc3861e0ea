"""The message record: strict validation (each error names its field in one line), round trips, new_message."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.errors import CrosstalkError, MessageError
from crosstalk.core.ids import hop_entry, is_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import (
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_TEXT_BYTES,
    Message,
    TextPart,
    check_text_size,
    new_message,
    parse_timestamp,
    utc_now_iso,
)

MID = "0192f3a4-5b6c-7d8e-9f01-23456789abcd"


def base(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "message_id": MID,
        "to": "bob",
        "from": "alice",
        "kind": "inform",
        "delivery": "auto",
        "sent_at": "2026-11-29T21:04:05.123Z",
        "parts": [{"type": "text", "text": "hello"}],
    }
    data.update(changes)
    return data


def without(key: str) -> dict[str, Any]:
    data = base()
    del data[key]
    return data


def expect_error(data: object, field: str, *, check_size: bool = True) -> MessageError:
    with pytest.raises(MessageError) as info:
        Message.from_dict(data, check_size=check_size)
    err = info.value
    assert err.field == field, f"error named {err.field!r}, expected {field!r}: {err}"
    text = str(err)
    assert text.startswith(f"{field}: "), text
    assert "\n" not in text and "\r" not in text, f"error message is not one line: {text!r}"
    assert err.problem and err.problem in text
    # every validation error is both a CrosstalkError and a ValueError
    assert isinstance(err, CrosstalkError) and isinstance(err, ValueError)
    return err


# ----------------------------------------------------------------- the happy path
def test_minimal_record_gets_defaults() -> None:
    msg = Message.from_dict({"message_id": MID, "to": "bob", "parts": [{"text": "hi"}]})
    assert msg.message_id == MID and msg.to == "bob"
    assert msg.parts == (TextPart("hi"),)
    assert msg.kind is Kind.INFORM and msg.delivery is Delivery.AUTO
    assert msg.from_ is None and msg.in_reply_to is None and msg.context_id is None and msg.task_id is None
    assert msg.deadline_seconds == 0 and msg.hop_chain == ()
    parse_timestamp(msg.sent_at)  # a default sent_at is filled in and is a valid timestamp


def test_nulls_mean_defaults() -> None:
    msg = Message.from_dict(
        base(kind=None, delivery=None, deadline_seconds=None, hop_chain=None, sent_at=None, **{"from": None})
    )
    assert msg.kind is Kind.INFORM and msg.delivery is Delivery.AUTO
    assert msg.deadline_seconds == 0 and msg.hop_chain == () and msg.from_ is None


def test_empty_optional_strings_become_none() -> None:
    msg = Message.from_dict(base(in_reply_to="", context_id="", task_id="", **{"from": ""}))
    assert msg.from_ is None and msg.in_reply_to is None and msg.context_id is None and msg.task_id is None


def test_unknown_top_level_fields_are_ignored() -> None:
    msg = Message.from_dict(base(future_field={"x": 1}, sender_class="verified"))
    assert msg.to == "bob"
    assert "future_field" not in msg.to_dict()


def test_text_joins_parts_and_counts_utf8_bytes() -> None:
    msg = Message.from_dict(base(parts=[{"type": "text", "text": "é"}, {"text": "日本"}]))
    assert msg.text == "é\n日本"
    assert msg.text_bytes() == 2 + 6


def test_with_returns_a_changed_copy() -> None:
    msg = Message.from_dict(base())
    changed = msg.with_(to="carol")
    assert changed.to == "carol" and msg.to == "bob"
    assert changed.message_id == msg.message_id


def test_record_is_frozen() -> None:
    msg = Message.from_dict(base())
    with pytest.raises(AttributeError):
        msg.to = "carol"  # type: ignore[misc]


# ----------------------------------------------------------------- each field's error
def test_not_an_object() -> None:
    for bad in (None, [], "x", 3):
        expect_error(bad, "message")


@pytest.mark.parametrize("key", ["message_id", "to", "parts"])
def test_required_missing(key: str) -> None:
    err = expect_error(without(key), key)
    assert "required" in err.problem


@pytest.mark.parametrize("key", ["message_id", "to", "parts"])
def test_required_null(key: str) -> None:
    expect_error(base(**{key: None}), key)


@pytest.mark.parametrize("key", ["message_id", "to"])
@pytest.mark.parametrize("value", ["", "   ", "\t\n"])
def test_required_blank(key: str, value: str) -> None:
    err = expect_error(base(**{key: value}), key)
    assert "empty" in err.problem


@pytest.mark.parametrize("key", ["message_id", "to"])
@pytest.mark.parametrize("value", [1, 1.5, True, ["x"], {"a": 1}])
def test_required_wrong_type(key: str, value: object) -> None:
    err = expect_error(base(**{key: value}), key)
    assert type(value).__name__ in err.problem


@pytest.mark.parametrize(("key", "limit"), [("message_id", MAX_ID_CHARS), ("to", MAX_NAME_CHARS)])
def test_required_too_long(key: str, limit: int) -> None:
    Message.from_dict(base(**{key: "x" * limit}))
    err = expect_error(base(**{key: "x" * (limit + 1)}), key)
    assert str(limit) in err.problem


@pytest.mark.parametrize(
    ("key", "limit"),
    [("from", MAX_NAME_CHARS), ("in_reply_to", MAX_ID_CHARS), ("context_id", MAX_ID_CHARS), ("task_id", MAX_ID_CHARS)],
)
def test_optional_fields_are_checked_when_present(key: str, limit: int) -> None:
    Message.from_dict(base(**{key: "y" * limit}))
    expect_error(base(**{key: "y" * (limit + 1)}), key)
    expect_error(base(**{key: 7}), key)
    expect_error(base(**{key: "  "}), key)


def test_unknown_kind() -> None:
    err = expect_error(base(kind="shout"), "kind")
    assert "'shout'" in err.problem
    for k in Kind:
        assert k.value in err.problem  # the error lists what is allowed


@pytest.mark.parametrize("value", [1, True, ["ask"], {"k": "ask"}])
def test_kind_wrong_type(value: object) -> None:
    expect_error(base(kind=value), "kind")


def test_kind_is_case_sensitive() -> None:
    expect_error(base(kind="ASK"), "kind")


def test_bad_delivery() -> None:
    err = expect_error(base(delivery="eventually"), "delivery")
    assert "'eventually'" in err.problem and "next_turn" in err.problem
    expect_error(base(delivery=3), "delivery")


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("user", Kind.INFORM),
        ("inform", Kind.INFORM),
        ("ask", Kind.ASK),
        ("command", Kind.COMMAND),
        ("meta", Kind.META),
        ("ping", Kind.PING),
    ],
)
def test_kind_values_and_aliases(raw: str, kind: Kind) -> None:
    msg = Message.from_dict(base(kind=raw))
    assert msg.kind is kind
    assert msg.to_dict()["kind"] == kind.value  # the alias is normalised away


@pytest.mark.parametrize(
    ("raw", "delivery"),
    [
        ("immediate", Delivery.AUTO),
        ("auto", Delivery.AUTO),
        ("steer", Delivery.STEER),
        ("next_turn", Delivery.NEXT_TURN),
        ("followUp", Delivery.NEXT_TURN),
        ("follow_up", Delivery.NEXT_TURN),
    ],
)
def test_delivery_values_and_aliases(raw: str, delivery: Delivery) -> None:
    msg = Message.from_dict(base(delivery=raw))
    assert msg.delivery is delivery
    assert msg.to_dict()["delivery"] == delivery.value


def test_deadline_on_ask() -> None:
    assert Message.from_dict(base(kind="ask", deadline_seconds=30)).deadline_seconds == 30
    assert Message.from_dict(base(kind="ask", deadline_seconds=0)).deadline_seconds == 0


@pytest.mark.parametrize("kind", ["inform", "user", "command", "meta", "ping"])
def test_deadline_on_non_ask_rejected(kind: str) -> None:
    err = expect_error(base(kind=kind, deadline_seconds=5), "deadline_seconds")
    assert "ask" in err.problem


def test_zero_deadline_on_non_ask_is_fine() -> None:
    assert Message.from_dict(base(kind="inform", deadline_seconds=0)).deadline_seconds == 0


@pytest.mark.parametrize("value", [-1, -100, True, False, 1.5, 2.0, "10", [1], {"s": 1}])
def test_bad_deadline(value: object) -> None:
    expect_error(base(kind="ask", deadline_seconds=value), "deadline_seconds")


@pytest.mark.parametrize(
    "value",
    [
        "not-a-list",
        ["abc"],
        [hop_entry("a" * 16).upper()],
        [hop_entry("a" * 16) + "0"],
        [hop_entry("a" * 16), 5],
        [hop_entry("a" * 16) + "\n"],
        [None],
        {"a": 1},
    ],
)
def test_bad_hop_chain(value: object) -> None:
    expect_error(base(hop_chain=value), "hop_chain")


def test_good_hop_chain() -> None:
    chain = [hop_entry(f"{i:016x}") for i in range(3)]
    assert Message.from_dict(base(hop_chain=chain)).hop_chain == tuple(chain)


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01T00:00:00Z", "29/11/2026", "2026-11-29T25:00:00Z"])
def test_bad_sent_at(value: str) -> None:
    err = expect_error(base(sent_at=value), "sent_at")
    assert repr(value) in err.problem


@pytest.mark.parametrize("value", [12345, 1.5, ["2026-11-29T21:04:05Z"], True])
def test_sent_at_wrong_type(value: object) -> None:
    expect_error(base(sent_at=value), "sent_at")


def test_sent_at_with_newline_gives_a_one_line_error() -> None:
    expect_error(base(sent_at="2026-11-29\nT21:04:05Z"), "sent_at")


@pytest.mark.parametrize("value", ["2026-11-29T21:04:05Z", "2026-11-29T21:04:05.123+02:00", "2026-11-29T21:04:05"])
def test_good_sent_at(value: str) -> None:
    assert Message.from_dict(base(sent_at=value)).sent_at == value


@pytest.mark.parametrize("value", [[], {}, "hello", [["text"]]])
def test_bad_parts_container(value: object) -> None:
    field = "parts[0]" if value == [["text"]] else "parts"
    expect_error(base(parts=value), field)


@pytest.mark.parametrize("ptype", ["image", "file", "data", "", None, 3])
def test_non_text_part_type(ptype: object) -> None:
    err = expect_error(base(parts=[{"type": "text", "text": "a"}, {"type": ptype, "text": "b"}]), "parts[1].type")
    assert repr(ptype) in err.problem


@pytest.mark.parametrize("text", [None, 5, ["a"], {"t": "a"}])
def test_part_text_must_be_a_string(text: object) -> None:
    expect_error(base(parts=[{"type": "text", "text": text}]), "parts[0].text")


def test_part_without_text() -> None:
    expect_error(base(parts=[{"type": "text"}]), "parts[0].text")


def test_part_not_an_object() -> None:
    expect_error(base(parts=[{"text": "ok"}, "loose"]), "parts[1]")


def test_empty_text_is_allowed() -> None:
    assert Message.from_dict(base(parts=[{"text": ""}])).text == ""


# ----------------------------------------------------------------- the 64 KiB text limit
def test_text_limit_boundary_ascii() -> None:
    assert MAX_TEXT_BYTES == 65536
    assert Message.from_dict(base(parts=[{"text": "a" * 65536}])).text_bytes() == 65536
    err = expect_error(base(parts=[{"text": "a" * 65537}]), "parts")
    assert "65537" in err.problem and "65536" in err.problem


def test_text_limit_counts_utf8_bytes_not_characters() -> None:
    # "€" is 3 bytes: 21845 * 3 = 65535 (+1 ASCII byte = 65536 exactly), one more euro goes over
    assert Message.from_dict(base(parts=[{"text": "€" * 21845 + "a"}])).text_bytes() == 65536
    expect_error(base(parts=[{"text": "€" * 21846}]), "parts")  # 65538 bytes but only 21846 characters
    # 4-byte characters: 16384 * 4 = 65536 exactly
    Message.from_dict(base(parts=[{"text": "😀" * 16384}]))
    expect_error(base(parts=[{"text": "😀" * 16384 + "a"}]), "parts")


def test_text_limit_sums_across_parts() -> None:
    Message.from_dict(base(parts=[{"text": "a" * 32768}, {"text": "b" * 32768}]))
    expect_error(base(parts=[{"text": "a" * 32768}, {"text": "b" * 32769}]), "parts")


def test_check_size_false_skips_the_limit_and_check_text_size_applies_it() -> None:
    msg = Message.from_dict(base(parts=[{"text": "a" * 70000}]), check_size=False)
    assert msg.text_bytes() == 70000
    with pytest.raises(MessageError) as info:
        check_text_size(msg)
    assert info.value.field == "parts"
    check_text_size(msg, limit=70000)


# ----------------------------------------------------------------- round trips
def test_to_dict_shape() -> None:
    d = Message.from_dict(base(kind="ask", deadline_seconds=9)).to_dict()
    assert set(d) == {
        "message_id",
        "from",
        "to",
        "kind",
        "delivery",
        "in_reply_to",
        "context_id",
        "task_id",
        "deadline_seconds",
        "hop_chain",
        "sent_at",
        "parts",
    }
    assert d["parts"] == [{"type": "text", "text": "hello"}]
    assert d["kind"] == "ask" and d["deadline_seconds"] == 9 and d["hop_chain"] == []


_names = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != "")
_ids = st.text(min_size=1, max_size=MAX_ID_CHARS).filter(lambda s: s.strip() != "")
_timestamps = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)).map(
    lambda d: d.isoformat().replace("+00:00", "Z")
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(list(Kind)))
    return Message(
        message_id=draw(_ids),
        to=draw(_names),
        parts=tuple(TextPart(t) for t in draw(st.lists(st.text(max_size=200), min_size=1, max_size=4))),
        from_=draw(st.none() | _names),
        kind=kind,
        delivery=draw(st.sampled_from(list(Delivery))),
        in_reply_to=draw(st.none() | _ids),
        context_id=draw(st.none() | _ids),
        task_id=draw(st.none() | _ids),
        deadline_seconds=draw(st.integers(0, 10**9)) if kind is Kind.ASK else 0,
        hop_chain=tuple(
            hop_entry(a) for a in draw(st.lists(st.from_regex(r"[0-9a-f]{16}", fullmatch=True), max_size=5))
        ),
        sent_at=draw(_timestamps),
    )


@given(messages())
def test_round_trip(msg: Message) -> None:
    assert Message.from_dict(msg.to_dict()) == msg


@given(messages())
def test_round_trip_through_json(msg: Message) -> None:
    import json

    assert Message.from_dict(json.loads(json.dumps(msg.to_dict()))) == msg


# ----------------------------------------------------------------- new_message and timestamps
def test_new_message_builds_a_valid_record() -> None:
    msg = new_message(
        "bob",
        "hi there",
        from_="alice",
        kind="ask",
        delivery="followUp",
        deadline_seconds=60,
        in_reply_to="x-1",
        context_id="ctx",
    )
    assert is_message_id(msg.message_id)
    assert msg.to == "bob" and msg.text == "hi there" and msg.from_ == "alice"
    assert msg.kind is Kind.ASK and msg.delivery is Delivery.NEXT_TURN and msg.deadline_seconds == 60
    assert msg.in_reply_to == "x-1" and msg.context_id == "ctx"
    parse_timestamp(msg.sent_at)


def test_new_message_accepts_enums_and_a_given_id() -> None:
    msg = new_message("bob", "x", kind=Kind.META, delivery=Delivery.STEER, message_id=MID)
    assert msg.message_id == MID and msg.kind is Kind.META and msg.delivery is Delivery.STEER


def test_new_message_validates() -> None:
    with pytest.raises(MessageError) as info:
        new_message("bob", "x", deadline_seconds=5)
    assert info.value.field == "deadline_seconds"
    with pytest.raises(MessageError) as info:
        new_message("", "x")
    assert info.value.field == "to"
    with pytest.raises(MessageError) as info:
        new_message("bob", "a" * (MAX_TEXT_BYTES + 1))
    assert info.value.field == "parts"


def test_new_message_ids_are_uuidv7() -> None:
    msg = new_message("bob", "x")
    mid = msg.message_id
    assert is_message_id(mid)
    assert mid[14] == "7"  # version nibble
    assert mid[19] in "89ab"  # RFC 9562 variant
    ms = int(mid.replace("-", "")[:12], 16)  # unix_ts_ms in the top 48 bits
    assert abs(ms / 1000 - time.time()) < 5


def test_new_message_ids_sort_by_time() -> None:
    ids = [new_message("bob", "x").message_id for _ in range(200)]
    assert len(set(ids)) == 200
    assert ids == sorted(ids)
    first = new_message("bob", "x").message_id
    time.sleep(0.003)  # the clock moves on: what is tested is that the ids follow it
    later = new_message("bob", "x").message_id
    assert later > first
    assert int(later.replace("-", "")[:12], 16) > int(first.replace("-", "")[:12], 16)


def test_utc_now_iso_format() -> None:
    now = utc_now_iso()
    assert len(now) == len("2026-11-29T21:04:05.123Z") and now.endswith("Z")
    parsed = parse_timestamp(now)
    assert parsed.tzinfo is not None
    assert abs(parsed.timestamp() - time.time()) < 5


def test_parse_timestamp_naive_is_utc() -> None:
    assert parse_timestamp("2026-11-29T21:04:05").tzinfo is UTC
    assert parse_timestamp("2026-11-29T21:04:05Z") == parse_timestamp("2026-11-29T22:04:05+01:00")
