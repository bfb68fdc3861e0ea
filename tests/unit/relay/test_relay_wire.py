"""The relay's subjects and frames: the sending machine comes from the subject, never from the frame; a message
is readdressed to the local agent; answers round-trip; anything malformed is a FrameError."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.message import new_message
from crosstalk.core.states import Outcome, State
from crosstalk.relay.wire import (
    MAX_FRAME_BYTES,
    FrameError,
    decode_answer,
    decode_request,
    encode_answer,
    encode_error,
    encode_request,
    from_alias_of,
    inbound_subject,
    inbox_prefix,
    msg_subject,
    relayed_agent,
    sender_label,
    split_remote,
)


def test_subjects() -> None:
    assert msg_subject("laptop", "gpu") == "crosstalk.v1.msg.laptop.gpu"
    assert inbound_subject("laptop") == "crosstalk.v1.msg.laptop.*"
    assert inbox_prefix("gpu") == "_INBOX.gpu"
    assert from_alias_of("crosstalk.v1.msg.laptop.gpu", "laptop") == "gpu"


@pytest.mark.parametrize(
    "subject",
    ["crosstalk.v1.msg.other.gpu", "crosstalk.v1.msg.laptop", "crosstalk.v1.msg.laptop.gpu.x", "x.v1.msg.laptop.gpu"],
)
def test_a_subject_not_for_this_machine_is_refused(subject: str) -> None:
    with pytest.raises(FrameError):
        from_alias_of(subject, "laptop")


@pytest.mark.parametrize(
    ("address", "parts"),
    [("alice@laptop", ("alice", "laptop")), ("a@b@c", None), ("alice", None), ("@laptop", None), ("x@a.b", None)],
)
def test_split_remote(address: str, parts: tuple[str, str] | None) -> None:
    assert split_remote(address) == parts


def test_the_sender_is_named_under_the_subjects_machine() -> None:
    assert sender_label("gpu", "@cli:bob") == "@relay:gpu/cli:bob"
    assert sender_label("gpu", "@relay:laptop/alice") == "@relay:gpu/relay:laptop/alice"
    assert sender_label("gpu", "alice") == "@relay:gpu/alice"  # an agent gpu's relay process vouched for
    assert sender_label("gpu", "not a name") == "@relay:gpu/anonymous"
    assert sender_label("gpu", "0123456789abcdef") == "@relay:gpu/anonymous"  # an agent_id's shape is no name
    assert sender_label("gpu", None) == "@relay:gpu/anonymous"
    assert sender_label("gpu", "@cli:" + "x" * 300) == "@relay:gpu/anonymous"


@pytest.mark.parametrize(
    ("tag", "found"),
    [
        ("@relay:laptop/alice", ("alice", "laptop")),
        ("@relay:laptop/cli:bob", None),  # a relayed CLI sender: no way back
        ("@relay:gpu/relay:laptop/alice", None),
        ("@relay:a.b/alice", None),
        ("@relay:laptop", None),
        ("@bus:laptop/alice", None),
        (None, None),
    ],
)
def test_relayed_agent(tag: str | None, found: tuple[str, str] | None) -> None:
    assert relayed_agent(tag) == found


@given(st.text(max_size=40), st.text(max_size=40))
def test_a_label_names_the_subjects_machine_whatever_the_frame_says(alias: str, claimed: str) -> None:
    if not alias or not all(c.isascii() and (c.isalnum() or c in "_-") for c in alias):
        return
    label = sender_label(alias[:64], claimed)
    assert label.startswith(f"@relay:{alias[:64]}/")
    found = relayed_agent(label)
    assert found is None or found[1] == alias[:64]


def test_a_request_is_readdressed_and_its_id_kept() -> None:
    msg = new_message("alice@laptop", "hello", from_="@cli:bob", in_reply_to="r1", context_id="c1")
    local = decode_request(encode_request(msg), "laptop", "gpu")
    assert local.to == "alice"
    assert local.from_ == "@relay:gpu/cli:bob"
    assert (local.message_id, local.text, local.in_reply_to, local.context_id) == (msg.message_id, "hello", "r1", "c1")


def test_an_ask_crosses_as_an_ask_and_an_older_machine_reads_the_inform() -> None:
    msg = new_message("alice@laptop", "which CUDA?", from_="bob", kind="ask", deadline_seconds=90)
    frame = encode_request(msg)
    local = decode_request(frame, "laptop", "gpu")
    assert (local.kind.value, local.deadline_seconds, local.message_id) == ("ask", 90, msg.message_id)
    # What a relay process from before relayed asks reads (it ignores "ask"): the inform with the ask's id it was.
    older = json.loads(frame)["message"]
    assert (older["kind"], older["deadline_seconds"], older["message_id"]) == ("inform", 0, msg.message_id)
    assert decode_request(json.dumps({"v": 1, "message": older}).encode(), "laptop", "gpu").kind.value == "inform"


@pytest.mark.parametrize("ask", [None, {"deadline_seconds": -1}, {"deadline_seconds": "9"}, [], {}])
def test_a_malformed_ask_is_a_frame_error(ask: object) -> None:
    obj = json.loads(encode_request(new_message("alice@laptop", "q", from_="bob", kind="ask")))
    obj["ask"] = ask
    with pytest.raises(FrameError, match="ask frame"):
        decode_request(json.dumps(obj).encode(), "laptop", "gpu")


def test_a_frame_cannot_choose_its_machine() -> None:
    """Whatever `from` says, the machine is the subject's: a hostile frame claiming another machine's agent stays
    under its own machine's name."""
    msg = new_message("alice@laptop", "hi", from_="@relay:laptop/alice")
    assert decode_request(encode_request(msg), "laptop", "evil").from_ == "@relay:evil/relay:laptop/alice"


@pytest.mark.parametrize(
    ("frame", "says"),
    [
        (b"not json", "not a JSON frame"),
        (b"[]", "JSON object"),
        (b'{"v": 2, "message": {}}', "frame version 2"),
        (b'{"v": 1}', "no message object"),
        (json.dumps({"v": 1, "message": {"to": "alice@other", "parts": []}}).encode(), "not to NAME@laptop"),
        (json.dumps({"v": 1, "message": {"to": "alice", "parts": []}}).encode(), "not to NAME@laptop"),
        (json.dumps({"v": 1, "message": {"to": "alice@laptop", "message_id": "m", "parts": []}}).encode(), "invalid"),
        (b"x" * (MAX_FRAME_BYTES + 1), "over"),
    ],
)
def test_malformed_requests_are_frame_errors(frame: bytes, says: str) -> None:
    with pytest.raises(FrameError, match=says):
        decode_request(frame, "laptop", "gpu")


def test_answers_round_trip() -> None:
    out = Outcome("m1", State.ACCEPTED, None, {"harness": "fake"})
    answer = decode_answer(encode_answer(out, "alice", "a-1"))
    assert (answer.outcome, answer.to, answer.agent_id, answer.error) == (out, "alice", "a-1", None)
    err = decode_answer(encode_error("no_agent", "no live agent is named 'alice'"))
    assert (err.outcome, err.error, err.detail) == (None, "no_agent", "no live agent is named 'alice'")


@pytest.mark.parametrize(
    "frame",
    [b'{"v": 1, "error": "boom", "detail": "x"}', b'{"v": 1, "outcome": {"state": "accepted"}}',
     b'{"v": 1, "outcome": {"message_id": "m", "state": "accepted"}}', b"{}"],
)  # fmt: skip
def test_bad_answers_are_frame_errors(frame: bytes) -> None:
    with pytest.raises(FrameError):
        decode_answer(frame)


@given(st.binary(max_size=300))
def test_no_bytes_crash_the_decoders(data: bytes) -> None:
    for decode in (lambda d: decode_request(d, "laptop", "gpu"), decode_answer):
        try:
            decode(data)
        except FrameError:
            pass


def test_the_relay_process_answers_what_the_chain_never_saw(tmp_path) -> None:
    """The relay process's hop (relay/deliver.py): a frame it cannot read, or an agent this machine does not have, is
    an error answer naming why (the sender turns it into a clear line); nothing is sent anywhere."""
    import asyncio

    from crosstalk.registry.paths import StatePaths
    from crosstalk.relay.deliver import Deliverer

    paths = StatePaths(tmp_path / "state").ensure()
    hands = Deliverer(paths)
    bad = decode_answer(asyncio.run(hands.answer(b"{", "laptop", "gpu")))
    assert bad.error == "bad_frame" and "not a JSON frame" in (bad.detail or "")
    frame = encode_request(new_message("carol@laptop", "hi", from_="@cli:bob"))
    missing = decode_answer(asyncio.run(hands.answer(frame, "laptop", "gpu")))
    assert missing.error == "no_agent" and "carol" in (missing.detail or "")


def test_connection_errors_in_plain_words() -> None:
    import nats.errors as ne

    from crosstalk.relay.link import describe

    assert "refused this machine's credentials" in describe(ne.Error("nats: 'Authorization Violation'"))
    assert "refused this machine's credentials" in describe(ne.AuthorizationError())
    assert describe(ConnectionRefusedError(111, "Connection refused")).startswith("connection refused")
    assert describe(TimeoutError()) == "timed out"
    assert describe(ne.Error("nats: 'Maximum Connections Exceeded'")) == "Maximum Connections Exceeded"
    assert describe(None) == "no reason given"
