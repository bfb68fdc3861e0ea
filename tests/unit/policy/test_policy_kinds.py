"""The kind table over every kind × bucket × sender class × role × transport, plus named cases."""

from __future__ import annotations

import itertools

import pytest

from crosstalk.core.kinds import Kind
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy import Bucket, ReceiverView, Role, check_kind

ME = "0" * 16
OWNER = "1" * 16
OTHER = "4" * 16
TRANSPORTS = ["uds", "a2a", "bus", "relay"]


def sender_of(sender_class: SenderClass) -> Sender:
    if sender_class is SenderClass.VERIFIED:
        return Sender(sender_class, OWNER, "boss")
    if sender_class is SenderClass.EXTERNAL:
        return Sender(sender_class, None, "@ci:build")
    return Sender(sender_class, None, "mallory")


def view_of(role: Role) -> ReceiverView:
    return ReceiverView(ME, "me", role, OWNER if role is Role.WORKER else None)


def expected_kind(kind: str, bucket: str, sender_class: str, role: str, transport: str) -> str | None:
    """The table, written out by hand, independent of the code under test."""
    if transport == "uds" and kind in ("ask", "command"):
        return "kind:not_on_uds"
    if transport == "relay" and kind == "command":
        return "kind:not_on_relay"
    if kind == "command":
        if bucket == "parent" and role == "worker" and sender_class == "verified":
            return None
        return "kind:command_needs_parent"
    if kind == "ask":
        if sender_class == "verified" or (sender_class == "external" and transport == "relay"):
            return None
        return "kind:ask_needs_verified"
    if kind in ("inform", "meta", "ping"):
        return None
    raise AssertionError(f"no row for kind {kind}")


CELLS = list(itertools.product(Kind, Bucket, SenderClass, Role, TRANSPORTS))


def test_cell_count() -> None:
    assert len(CELLS) == 5 * 6 * 3 * 4 * 4


@pytest.mark.parametrize(("kind", "bucket", "sender_class", "role", "transport"), CELLS, ids=str)
def test_every_cell(kind: Kind, bucket: Bucket, sender_class: SenderClass, role: Role, transport: str) -> None:
    got = check_kind(kind, bucket, sender_of(sender_class), view_of(role), transport)
    assert got == expected_kind(kind.value, bucket.value, sender_class.value, role.value, transport)


WORKER = view_of(Role.WORKER)
PRIMARY = view_of(Role.PRIMARY)
OWNER_SENDER = Sender(SenderClass.VERIFIED, OWNER, "boss", "a2a")
NON_OWNER = Sender(SenderClass.VERIFIED, OTHER, "carol", "a2a")
UNVERIFIED = Sender(SenderClass.UNVERIFIED, None, "mallory", "uds")
EXTERNAL = Sender(SenderClass.EXTERNAL, None, "@ci:build", "uds")

NAMED: list[tuple[str, Kind, Bucket, Sender, ReceiverView, str, str | None]] = [
    # A non-owner primary sends command to a subagent → rejected, never injected.
    (
        "non-owner command to worker",
        Kind.COMMAND,
        Bucket.AGENTS,
        NON_OWNER,
        WORKER,
        "a2a",
        "kind:command_needs_parent",
    ),
    ("owner command to its worker", Kind.COMMAND, Bucket.PARENT, OWNER_SENDER, WORKER, "a2a", None),
    ("owner command over uds", Kind.COMMAND, Bucket.PARENT, OWNER_SENDER, WORKER, "uds", "kind:not_on_uds"),
    # A registered primary may not command another primary: only an owner commands.
    (
        "command to a primary",
        Kind.COMMAND,
        Bucket.AGENTS,
        NON_OWNER,
        PRIMARY,
        "a2a",
        "kind:command_needs_parent",
    ),
    (
        "child commands its parent",
        Kind.COMMAND,
        Bucket.CHILDREN,
        NON_OWNER,
        PRIMARY,
        "a2a",
        "kind:command_needs_parent",
    ),
    (
        "peer command",
        Kind.COMMAND,
        Bucket.PEERS,
        NON_OWNER,
        view_of(Role.PEER),
        "a2a",
        "kind:command_needs_parent",
    ),
    ("external command", Kind.COMMAND, Bucket.EXTERNAL, EXTERNAL, WORKER, "a2a", "kind:command_needs_parent"),
    # A mislabelled bucket never grants command to an unproven sender.
    (
        "unverified labelled parent",
        Kind.COMMAND,
        Bucket.PARENT,
        UNVERIFIED,
        WORKER,
        "a2a",
        "kind:command_needs_parent",
    ),
    # An unverified ask is rejected, its inform is allowed.
    ("unverified ask", Kind.ASK, Bucket.UNKNOWN, UNVERIFIED, PRIMARY, "a2a", "kind:ask_needs_verified"),
    ("unverified inform", Kind.INFORM, Bucket.UNKNOWN, UNVERIFIED, PRIMARY, "uds", None),
    ("external ask", Kind.ASK, Bucket.EXTERNAL, EXTERNAL, PRIMARY, "bus", "kind:ask_needs_verified"),
    ("external inform", Kind.INFORM, Bucket.EXTERNAL, EXTERNAL, PRIMARY, "uds", None),
    # Another machine's agent, its relay process proven by the uds socket (ingress/relay_peer.py): its ask passes.
    ("relayed agent's ask", Kind.ASK, Bucket.EXTERNAL, EXTERNAL, PRIMARY, "relay", None),
    (
        "unverified ask over the relay",
        Kind.ASK,
        Bucket.UNKNOWN,
        UNVERIFIED,
        PRIMARY,
        "relay",
        "kind:ask_needs_verified",
    ),
    ("command over the relay", Kind.COMMAND, Bucket.EXTERNAL, EXTERNAL, WORKER, "relay", "kind:not_on_relay"),
    ("unverified ask over uds", Kind.ASK, Bucket.UNKNOWN, UNVERIFIED, PRIMARY, "uds", "kind:not_on_uds"),
    # A non-owner ask to a subagent carries inform permissions, no command authority.
    ("non-owner ask to worker", Kind.ASK, Bucket.AGENTS, NON_OWNER, WORKER, "a2a", None),
    ("verified ask over uds", Kind.ASK, Bucket.AGENTS, NON_OWNER, PRIMARY, "uds", "kind:not_on_uds"),
    ("meta over uds", Kind.META, Bucket.UNKNOWN, UNVERIFIED, WORKER, "uds", None),
    ("ping over uds", Kind.PING, Bucket.EXTERNAL, EXTERNAL, WORKER, "uds", None),
]


@pytest.mark.parametrize(
    ("kind", "bucket", "sender", "view", "transport", "expected"),
    [c[1:] for c in NAMED],
    ids=[c[0] for c in NAMED],
)
def test_named_cases(
    kind: Kind, bucket: Bucket, sender: Sender, view: ReceiverView, transport: str, expected: str | None
) -> None:
    assert check_kind(kind, bucket, sender, view, transport) == expected
