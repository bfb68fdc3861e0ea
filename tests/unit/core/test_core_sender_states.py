"""Sender classes (transport-proven identity) and delivery states/outcomes."""

from __future__ import annotations

import pytest

from crosstalk.core.sender import Sender, SenderClass, is_external_tag
from crosstalk.core.states import (
    DELIVERED_STATES,
    LATE_STATES,
    SEND_STATES,
    UNRESOLVED_STATES,
    Outcome,
    State,
)


@pytest.mark.parametrize("tag", ["@ci:build", "@github:org/repo#12", "@a:b", "@x.y-z_1:topic"])
def test_external_tags(tag: str) -> None:
    assert is_external_tag(tag)
    s = Sender.unverified(tag, transport="uds")
    assert s.sender_class is SenderClass.EXTERNAL and s.name == tag and s.agent_id is None


@pytest.mark.parametrize(
    "tag", [None, "", "alice", "@ci", "@:x", "ci:build", "@ci:", "@ci:has space", "@-x:y", "@ci:build\n"]
)
def test_not_external_tags(tag: str | None) -> None:
    assert not is_external_tag(tag)
    s = Sender.unverified(tag)
    assert s.sender_class is SenderClass.UNVERIFIED
    assert s.name == (tag or None)


def test_dedupe_key() -> None:
    assert Sender(SenderClass.VERIFIED, "0123456789abcdef", "alice").dedupe_key == "agent:0123456789abcdef"
    # a verified sender without an agent id falls back to the class form
    assert Sender(SenderClass.VERIFIED, None, "alice").dedupe_key == "verified:alice"
    assert Sender.unverified("@ci:build").dedupe_key == "external:@ci:build"
    assert Sender.unverified("bob").dedupe_key == "unverified:bob"
    assert Sender.unverified(None).dedupe_key == "unverified:-"


def test_dedupe_key_separates_verified_from_a_claimed_name() -> None:
    verified = Sender(SenderClass.VERIFIED, "0123456789abcdef", "alice")
    impostor = Sender.unverified("alice")
    assert verified.dedupe_key != impostor.dedupe_key


def test_labels() -> None:
    assert Sender(SenderClass.VERIFIED, "0123456789abcdef", "alice").label == "alice"
    assert Sender(SenderClass.VERIFIED, "0123456789abcdef").label == "0123456789abcdef"
    assert Sender(SenderClass.VERIFIED).label == "?"
    assert Sender.unverified("@ci:build").label == "@ci:build"
    assert Sender(SenderClass.EXTERNAL).label == "@unknown"
    assert Sender.unverified("bob").label == "bob (unverified)"
    assert Sender.unverified(None).label == "anonymous (unverified)"


@pytest.mark.parametrize(
    "sender",
    [
        Sender(SenderClass.VERIFIED, "0123456789abcdef", "alice", "a2a"),
        Sender.unverified("@ci:build"),
        Sender.unverified(None, transport="bus"),
    ],
)
def test_sender_round_trip(sender: Sender) -> None:
    d = sender.to_dict()
    assert set(d) == {"class", "agent_id", "name", "transport"}
    assert Sender.from_dict(d) == sender


def test_sender_from_dict_defaults_transport() -> None:
    assert Sender.from_dict({"class": "unverified"}).transport == "uds"
    with pytest.raises(ValueError):
        Sender.from_dict({"class": "trusted"})


def test_state_sets() -> None:
    assert {State.ACCEPTED, State.QUEUED, State.HELD, State.REJECTED, State.UNREACHABLE, State.UNKNOWN} == SEND_STATES
    assert DELIVERED_STATES < SEND_STATES
    assert State.RECOVERED not in SEND_STATES and State.BOUNCED not in SEND_STATES
    assert {State.SUBMITTED, State.DISPATCHING, State.HELD, State.UNKNOWN, State.RECOVERED} == UNRESOLVED_STATES
    assert not (DELIVERED_STATES & UNRESOLVED_STATES)
    assert State.HELD not in LATE_STATES and DELIVERED_STATES <= LATE_STATES


def test_outcome_to_dict_omits_empty_fields() -> None:
    assert Outcome("m1", State.ACCEPTED).to_dict() == {"message_id": "m1", "state": "accepted"}
    full = Outcome("m1", State.REJECTED, "policy:kind", {"pid": 3})
    d = full.to_dict()
    assert d == {"message_id": "m1", "state": "rejected", "reason": "policy:kind", "evidence": {"pid": 3}}
    d["evidence"]["pid"] = 4
    assert full.evidence == {"pid": 3}  # to_dict copies the evidence
