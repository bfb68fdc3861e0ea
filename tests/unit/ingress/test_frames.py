"""The uds wire format: parsing lines, building frames and answers, and fuzzing the parser."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.errors import CrosstalkError, MessageError
from crosstalk.core.ids import hop_entry
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import MAX_TEXT_BYTES, Message, TextPart, new_message
from crosstalk.core.states import Outcome, State
from crosstalk.ingress.errors import FrameError
from crosstalk.ingress.frames import (
    CROSSTALK_FRAME_VERSION,
    KEPT_TAIL,
    MAX_LINE_BYTES,
    AuthLine,
    UserLine,
    encode_answer,
    encode_auth,
    encode_crosstalk_user,
    encode_error_answer,
    message_from_crosstalk,
    parse_answer,
    parse_line,
    says_kept,
)

MID = "0192f3a4-5b6c-7d8e-9f01-23456789abcd"


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def frame_error(raw: bytes) -> str:
    with pytest.raises(FrameError) as info:
        parse_line(raw)
    assert isinstance(info.value, CrosstalkError)
    msg = str(info.value)
    assert msg
    return msg


# ----------------------------------------------------------------- good lines
def test_auth_line() -> None:
    assert parse_line(line({"type": "auth", "token": "s3cret"})) == AuthLine("s3cret")
    assert parse_line(encode_auth("tok")) == AuthLine("tok")
    assert encode_auth("tok").endswith(b"\n") and encode_auth("tok").count(b"\n") == 1


def test_auth_line_without_newline_and_with_extras() -> None:
    assert parse_line(b'{"type":"auth","token":"t","extra":1}') == AuthLine("t")


def test_native_user_line() -> None:
    raw = line(
        {
            "type": "user",
            "message": {"role": "user", "content": "hello"},
            "msgV": 1,
            "from": "claude-1",
            "msg_id": "n-1",
        }
    )
    parsed = parse_line(raw)
    assert isinstance(parsed, UserLine)
    assert parsed.is_native and parsed.crosstalk is None
    assert parsed.content == "hello" and parsed.native_from == "claude-1" and parsed.native_msg_id == "n-1"


def test_native_user_line_role_defaults_to_user_and_odd_display_fields_are_dropped() -> None:
    parsed = parse_line(line({"type": "user", "message": {"content": "x"}, "from": 5, "msg_id": ["a"]}))
    assert isinstance(parsed, UserLine)
    assert parsed.native_from is None and parsed.native_msg_id is None and parsed.is_native


def test_crosstalk_user_line() -> None:
    raw = line({"type": "user", "message": {"role": "user", "content": "hi"}, "crosstalk": {"v": 1}})
    parsed = parse_line(raw)
    assert isinstance(parsed, UserLine)
    assert not parsed.is_native and parsed.crosstalk == {"v": 1}


def test_crosstalk_null_means_native() -> None:
    parsed = parse_line(line({"type": "user", "message": {"content": "x"}, "crosstalk": None}))
    assert isinstance(parsed, UserLine) and parsed.is_native


def test_line_at_the_size_limit_is_parsed() -> None:
    head = b'{"type":"auth","token":"'
    tail = b'"}'
    raw = head + b"t" * (MAX_LINE_BYTES - len(head) - len(tail)) + tail
    assert len(raw) == MAX_LINE_BYTES
    assert isinstance(parse_line(raw), AuthLine)


# ----------------------------------------------------------------- every FrameError
@pytest.mark.parametrize("raw", [b"", b"not json", b"{", b'{"type":"auth"', b"\xff\xfe\xfa", b"{'a': 1}"])
def test_not_json(raw: bytes) -> None:
    assert "not JSON" in frame_error(raw)


@pytest.mark.parametrize("raw", [b"[]", b"1", b'"auth"', b"null", b"true", b'[{"type":"auth","token":"t"}]'])
def test_not_an_object(raw: bytes) -> None:
    assert "JSON object" in frame_error(raw)


@pytest.mark.parametrize("ftype", [None, "assistant", "AUTH", 1, ["user"], {"t": "user"}])
def test_unknown_type(ftype: object) -> None:
    msg = frame_error(line({"type": ftype, "token": "t"}))
    assert "unknown frame type" in msg and repr(ftype) in msg


def test_missing_type() -> None:
    assert "unknown frame type None" in frame_error(line({"token": "t"}))


@pytest.mark.parametrize("token", [None, "", 5, ["t"], {"t": 1}])
def test_auth_missing_or_bad_token(token: object) -> None:
    obj: dict[str, object] = {"type": "auth"}
    if token is not None:
        obj["token"] = token
    assert "token" in frame_error(line(obj))


@pytest.mark.parametrize("message", [None, "hello", ["hello"], 3])
def test_user_without_message_object(message: object) -> None:
    obj: dict[str, object] = {"type": "user"}
    if message is not None:
        obj["message"] = message
    assert "'message' object" in frame_error(line(obj))


@pytest.mark.parametrize("content", [None, 1, ["a"], [{"type": "text", "text": "a"}], {"text": "a"}])
def test_content_not_a_string(content: object) -> None:
    message: dict[str, object] = {"role": "user"}
    if content is not None:
        message["content"] = content
    assert "content must be a string" in frame_error(line({"type": "user", "message": message}))


@pytest.mark.parametrize("role", ["assistant", "system", None, 1, ""])
def test_role_not_user(role: object) -> None:
    msg = frame_error(line({"type": "user", "message": {"role": role, "content": "x"}}))
    assert "role must be 'user'" in msg


@pytest.mark.parametrize("meta", ["v1", 1, ["v"], True])
def test_crosstalk_not_object(meta: object) -> None:
    msg = frame_error(line({"type": "user", "message": {"content": "x"}, "crosstalk": meta}))
    assert "'crosstalk' must be an object" in msg


def test_line_over_max_bytes() -> None:
    raw = b'{"type":"auth","token":"' + b"t" * MAX_LINE_BYTES + b'"}'
    msg = frame_error(raw)
    assert str(len(raw)) in msg and str(MAX_LINE_BYTES) in msg


def test_line_one_byte_over_is_refused_before_parsing() -> None:
    assert "limit" in frame_error(b" " * (MAX_LINE_BYTES + 1))


def test_deeply_nested_json_is_a_frame_error() -> None:
    # a line under the size limit that nests deeper than the interpreter's recursion limit
    for raw in (b"[" * 100_000, b'{"a":' * 50_000, b'{"type":"user","message":' + b"[" * 100_000):
        assert len(raw) <= MAX_LINE_BYTES
        frame_error(raw)


# ----------------------------------------------------------------- fuzzing
@given(st.binary(max_size=4096))
def test_parse_line_only_raises_frame_error_on_bytes(raw: bytes) -> None:
    try:
        parsed = parse_line(raw)
    except FrameError:
        return
    assert isinstance(parsed, AuthLine | UserLine)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
frame_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["auth", "user", "other"]) | json_values},
    optional={
        "token": json_values,
        "message": st.fixed_dictionaries(
            {}, optional={"role": st.just("user") | json_values, "content": st.text() | json_values}
        )
        | json_values,
        "crosstalk": st.none() | st.dictionaries(st.text(max_size=10), json_values, max_size=4) | json_values,
        "from": json_values,
        "msg_id": json_values,
    },
)


@given(json_values | frame_like)
def test_parse_line_only_raises_frame_error_on_json(value: object) -> None:
    raw = json.dumps(value).encode()
    try:
        parsed = parse_line(raw)
    except FrameError:
        return
    assert isinstance(parsed, AuthLine | UserLine)
    if isinstance(parsed, UserLine):
        assert isinstance(parsed.content, str)
        assert parsed.crosstalk is None or isinstance(parsed.crosstalk, dict)


@given(frame_like)
def test_message_from_crosstalk_raises_only_frame_or_message_errors(value: dict[str, object]) -> None:
    try:
        parsed = parse_line(json.dumps(value).encode())
    except FrameError:
        return
    if not isinstance(parsed, UserLine) or parsed.is_native:
        return
    try:
        msg = message_from_crosstalk(parsed, "bob")
    except (FrameError, MessageError):
        return
    assert msg.to == "bob" and msg.text == parsed.content


# ----------------------------------------------------------------- crosstalk frames ↔ messages
_names = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != "")
_timestamps = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)).map(
    lambda d: d.isoformat().replace("+00:00", "Z")
)


@st.composite
def wire_messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(list(Kind)))
    return Message(
        message_id=draw(_names),
        to=draw(_names),
        parts=(TextPart(draw(st.text(max_size=500))),),
        from_=draw(st.none() | _names),
        kind=kind,
        delivery=draw(st.sampled_from(list(Delivery))),
        in_reply_to=draw(st.none() | _names),
        context_id=draw(st.none() | _names),
        deadline_seconds=draw(st.integers(0, 10**6)) if kind is Kind.ASK else 0,
        hop_chain=tuple(hop_entry(f"{i:016x}") for i in range(draw(st.integers(0, 4)))),
        sent_at=draw(_timestamps),
    )


@given(wire_messages())
def test_crosstalk_frame_round_trip(msg: Message) -> None:
    raw = encode_crosstalk_user(msg)
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1  # one line, whatever the text holds
    parsed = parse_line(raw[:-1])
    assert isinstance(parsed, UserLine) and not parsed.is_native
    assert parsed.crosstalk is not None and parsed.crosstalk["v"] == CROSSTALK_FRAME_VERSION
    assert message_from_crosstalk(parsed, msg.to) == msg


def test_frame_round_trip_with_aliases_and_unicode() -> None:
    msg = new_message("bob", 'héllo\n<x> "q" \u2028 😀', from_="alice", kind="user", delivery="followUp")
    back = message_from_crosstalk(parse_line(encode_crosstalk_user(msg)), "bob")  # type: ignore[arg-type]
    assert back == msg and back.kind is Kind.INFORM and back.delivery is Delivery.NEXT_TURN


def test_frame_receiver_decides_the_to_field() -> None:
    msg = new_message("bob", "x")
    back = message_from_crosstalk(parse_line(encode_crosstalk_user(msg)), "agent-0001")  # type: ignore[arg-type]
    assert back.to == "agent-0001"


def test_frame_leaves_out_empty_optional_fields() -> None:
    meta = json.loads(encode_crosstalk_user(new_message("bob", "x")))["crosstalk"]
    assert set(meta) == {"v", "message_id", "from", "to", "kind", "delivery", "sent_at"}


def test_message_from_crosstalk_skips_the_size_limit() -> None:
    msg = Message.from_dict(
        {"message_id": MID, "to": "bob", "parts": [{"text": "a" * (MAX_TEXT_BYTES + 10)}]}, check_size=False
    )
    parsed = parse_line(encode_crosstalk_user(msg))
    assert isinstance(parsed, UserLine)
    assert message_from_crosstalk(parsed, "bob").text_bytes() == MAX_TEXT_BYTES + 10  # admission's job


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_message_from_crosstalk_version(version: object) -> None:
    with pytest.raises(FrameError) as info:
        message_from_crosstalk(UserLine("x", {"v": version, "message_id": MID}), "bob")
    assert "version" in str(info.value)


def test_message_from_crosstalk_missing_version_is_v1() -> None:
    assert message_from_crosstalk(UserLine("x", {"message_id": MID}), "bob").message_id == MID


def test_message_from_crosstalk_validates_the_record() -> None:
    with pytest.raises(MessageError) as info:
        message_from_crosstalk(UserLine("x", {"v": 1}), "bob")
    assert info.value.field == "message_id"
    with pytest.raises(MessageError) as info:
        message_from_crosstalk(
            UserLine("x", {"v": 1, "message_id": MID, "kind": "inform", "deadline_seconds": 3}), "bob"
        )
    assert info.value.field == "deadline_seconds"
    with pytest.raises(MessageError) as info:
        message_from_crosstalk(UserLine("x", {"v": 1, "message_id": MID, "hop_chain": ["nope"]}), "bob")
    assert info.value.field == "hop_chain"


# ----------------------------------------------------------------- answers
@pytest.mark.parametrize(
    "outcome",
    [
        Outcome(MID, State.ACCEPTED),
        Outcome(MID, State.QUEUED, None, {"via": "turn/steer"}),
        Outcome(MID, State.REJECTED, "policy:kind"),
        Outcome(MID, State.UNKNOWN, "timeout", {"n": 1}),
    ],
)
def test_answer_round_trip(outcome: Outcome) -> None:
    raw = encode_answer(outcome)
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert parse_answer(raw) == outcome


def test_error_answer() -> None:
    out = parse_answer(encode_error_answer("auth: bad token"))
    assert out == Outcome("", State.REJECTED, "auth: bad token")
    out = parse_answer(encode_error_answer("admission: too big", MID))
    assert out.message_id == MID and out.state is State.REJECTED


def test_parse_answer_ignores_non_object_evidence() -> None:
    assert parse_answer(b'{"state":"accepted","evidence":[1,2]}').evidence == {}


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "not JSON"),
        (b"garbage", "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        (b"[]", "no state"),
        (b'"accepted"', "no state"),
        (b'{"message_id":"m"}', "no state"),
        (b'{"state":"delivered"}', "unknown state 'delivered'"),
        (b'{"state":null}', "unknown state None"),
        (b'{"state":["accepted"]}', "unknown state"),
        (b"[" * 100_000, "not JSON"),
    ],
)
def test_parse_answer_errors(raw: bytes, words: str) -> None:
    with pytest.raises(FrameError) as info:
        parse_answer(raw)
    assert words in str(info.value)


@given(st.binary(max_size=512))
def test_parse_answer_only_raises_frame_error(raw: bytes) -> None:
    try:
        out = parse_answer(raw)
    except FrameError:
        return
    assert isinstance(out.state, State)


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        (b'{"task":{}}\n'[:-2] + KEPT_TAIL, True),  # as the agent writes it
        (b'{"task": {}, "kept": true}\n', True),  # json.dumps's spacing (the relay process's socket, a test peer)
        (b'{"task": {}, "kept" :  true }\r\n', True),
        (b'{"task": {}}\n', False),
        (b'{"task": {}, "kept": false}\n', False),
        (b'{"kept": true, "task": {}}\n', False),  # not the last member: taken as not kept, the safe side
        (b'{"note": "\\"kept\\": true"}\n', False),
        (b"", False),
    ],
)
def test_an_answer_says_kept_only_by_its_last_member(line: bytes, kept: bool) -> None:
    assert says_kept(line) is kept


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.booleans(), st.text(max_size=8)), max_size=4))
def test_says_kept_agrees_with_the_parsed_answer_for_a_last_kept_member(answer: dict) -> None:
    answer.pop("kept", None)
    plain = json.dumps(answer).encode() + b"\n"
    assert says_kept(plain) is False
    assert says_kept(json.dumps({**answer, "kept": True}).encode() + b"\n")
