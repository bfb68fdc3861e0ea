"""classify: every sender shape lands in exactly one bucket, from transport-proven identity only."""

from __future__ import annotations

import pytest

from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy import Bucket, ReceiverView, Role, classify

ME = "0" * 16
OWNER = "1" * 16
CHILD = "2" * 16
PEER_ID = "3" * 16
OTHER = "4" * 16

VIEW = ReceiverView(
    agent_id=ME,
    name="me",
    role=Role.WORKER,
    owner=OWNER,
    children=frozenset({CHILD}),
    peers=frozenset({PEER_ID, "bob"}),
)


def verified(agent_id: str | None, name: str | None = None, transport: str = "a2a") -> Sender:
    return Sender(SenderClass.VERIFIED, agent_id, name, transport)


CASES: list[tuple[str, Sender, ReceiverView, Bucket]] = [
    ("verified owner", verified(OWNER, "boss"), VIEW, Bucket.PARENT),
    ("verified owner over uds", verified(OWNER, "boss", "uds"), VIEW, Bucket.PARENT),
    ("verified child", verified(CHILD, "kid"), VIEW, Bucket.CHILDREN),
    ("verified peer by id", verified(PEER_ID, "whoever"), VIEW, Bucket.PEERS),
    ("verified peer by name", verified(OTHER, "bob"), VIEW, Bucket.PEERS),
    ("verified other agent", verified(OTHER, "carol"), VIEW, Bucket.AGENTS),
    ("verified other agent no name", verified(OTHER), VIEW, Bucket.AGENTS),
    ("verified self", verified(ME, "me"), VIEW, Bucket.AGENTS),
    # A name that equals the owner's id is not the owner: parent is matched on agent_id only.
    ("verified named like owner id", verified(OTHER, OWNER), VIEW, Bucket.AGENTS),
    # Precedence: parent before children before peers.
    (
        "owner also a peer",
        verified(OWNER, "bob"),
        ReceiverView(ME, "me", Role.WORKER, OWNER, peers=frozenset({OWNER, "bob"})),
        Bucket.PARENT,
    ),
    (
        "child also a peer",
        verified(CHILD, "bob"),
        ReceiverView(ME, "me", children=frozenset({CHILD}), peers=frozenset({CHILD})),
        Bucket.CHILDREN,
    ),
    # A verified class without an agent behind it proves nothing.
    ("verified no agent_id", verified(None, "bob"), VIEW, Bucket.UNKNOWN),
    ("verified empty agent_id", verified("", "bob"), VIEW, Bucket.UNKNOWN),
    ("verified no agent_id, unowned view", verified(None), ReceiverView(ME, "me"), Bucket.UNKNOWN),
    # Primary with no owner: nobody is parent.
    ("verified on unowned primary", verified(OWNER, "boss"), ReceiverView(ME, "me"), Bucket.AGENTS),
    # External and unverified senders never reach the identity buckets, whatever they claim.
    ("external tag", Sender(SenderClass.EXTERNAL, None, "@ci:build"), VIEW, Bucket.EXTERNAL),
    ("external claiming owner id", Sender(SenderClass.EXTERNAL, OWNER, "@ci:build"), VIEW, Bucket.EXTERNAL),
    ("external named like a peer", Sender(SenderClass.EXTERNAL, None, "bob"), VIEW, Bucket.EXTERNAL),
    ("unverified named", Sender(SenderClass.UNVERIFIED, None, "mallory"), VIEW, Bucket.UNKNOWN),
    ("unverified anonymous", Sender(SenderClass.UNVERIFIED), VIEW, Bucket.UNKNOWN),
    ("unverified claiming owner id", Sender(SenderClass.UNVERIFIED, OWNER, OWNER), VIEW, Bucket.UNKNOWN),
    ("unverified claiming child id", Sender(SenderClass.UNVERIFIED, CHILD, "kid"), VIEW, Bucket.UNKNOWN),
    ("unverified claiming peer name", Sender(SenderClass.UNVERIFIED, None, "bob"), VIEW, Bucket.UNKNOWN),
    ("Sender.unverified @tag", Sender.unverified("@cron:nightly"), VIEW, Bucket.EXTERNAL),
    ("Sender.unverified bare scheme:topic", Sender.unverified("ci:build"), VIEW, Bucket.UNKNOWN),
    ("Sender.unverified None", Sender.unverified(None), VIEW, Bucket.UNKNOWN),
]


@pytest.mark.parametrize(("sender", "view", "bucket"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(sender: Sender, view: ReceiverView, bucket: Bucket) -> None:
    assert classify(sender, view) is bucket


@pytest.mark.parametrize("role", list(Role), ids=str)
def test_classify_ignores_role(role: Role) -> None:
    view = ReceiverView(ME, "me", role, OWNER, frozenset({CHILD}), frozenset({PEER_ID}))
    assert classify(verified(OWNER), view) is Bucket.PARENT
    assert classify(verified(CHILD), view) is Bucket.CHILDREN
    assert classify(verified(PEER_ID), view) is Bucket.PEERS
    assert classify(verified(OTHER), view) is Bucket.AGENTS
