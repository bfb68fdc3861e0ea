"""Addresses and the activation rule, as tables."""

from __future__ import annotations

import pytest

from crosstalk.bus.errors import BusError
from crosstalk.bus.protocol.addressing import actor_of, same_actor, split_address, validate_address, wakes
from crosstalk.bus.protocol.message import BusMessage


@pytest.mark.parametrize(
    ("addr", "parts"),
    [
        ("anthropic/sonnet@cachy", ("anthropic/sonnet", "cachy")),
        ("sonnet", ("sonnet", None)),
        ("sonnet@m1", ("sonnet", "m1")),
        ("alice", ("alice", None)),
    ],
)
def test_split_and_actor(addr: str, parts: tuple[str, str | None]) -> None:
    assert split_address(addr) == parts
    assert actor_of(addr) == parts[0]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("sonnet", "sonnet", True),
        ("sonnet@m1", "sonnet@m2", True),
        ("anthropic/sonnet", "sonnet", True),
        ("sonnet@m2", "anthropic/sonnet@m1", True),
        ("anthropic/sonnet", "anthropic/sonnet@x", True),
        ("anthropic-a/sonnet", "anthropic-b/sonnet", False),
        ("sonnet", "haiku", False),
        ("alice", "bob", False),
        ("alice", "x/alice", True),
    ],
)
def test_same_actor(a: str, b: str, same: bool) -> None:
    assert same_actor(a, b) is same
    assert same_actor(b, a) is same


def _msg(sender: str, to: str, *re: str) -> BusMessage:
    return BusMessage(sender=sender, to=to, timestamp="t", re=tuple(re))


SENDERS = {"q1.md": "alice", "q2.md": "anthropic/sonnet@m1", "q3.md": "bob"}


@pytest.mark.parametrize(
    ("msg", "addressee", "wake"),
    [
        (_msg("alice", "sonnet"), "anthropic/sonnet", True),  # a new task wakes its addressee
        (_msg("sonnet@m1", "alice", "q1.md"), "alice", True),  # a reply wakes the asker
        (_msg("sonnet@m1", "bob", "q1.md"), "bob", False),  # ... and nobody else (an FYI copy)
        (_msg("codex", "sonnet", "q2.md"), "anthropic/sonnet", True),  # the asker was sonnet on m1
        (_msg("codex", "sonnet", "q3.md", "q2.md"), "sonnet", True),  # any re: target counts
        (_msg("codex", "sonnet", "missing.md"), "sonnet", False),  # an unknown target wakes no one
        (_msg("anthropic/sonnet@m1", "sonnet"), "sonnet", False),  # self-sent never wakes
        (_msg("sonnet@m1", "sonnet@m2", "q2.md"), "sonnet", False),  # self-sent across machines
    ],
)
def test_activation_rule(msg: BusMessage, addressee: str, wake: bool) -> None:
    assert wakes(msg, addressee, SENDERS.get) is wake


@pytest.mark.parametrize("addr", ["sonnet", "anthropic/sonnet", "anthropic/sonnet@m1", "x@y"])
def test_valid_addresses(addr: str) -> None:
    assert validate_address(addr) == addr


@pytest.mark.parametrize(
    ("addr", "why"),
    [
        ("", "empty"),
        ("a b", "whitespace"),
        ("a\tb", "whitespace"),
        ("a@b@c", "more than one '@'"),
        ("@m1", "no model"),
        ("sonnet@", "empty machine"),
        ("a/b/c", "MODEL or PROVIDER/MODEL"),
        ("/sonnet", "MODEL or PROVIDER/MODEL"),
        ("x" * 201, "longer than"),
    ],
)
def test_invalid_addresses(addr: str, why: str) -> None:
    with pytest.raises(BusError) as info:
        validate_address(addr)
    assert why in info.value.message
