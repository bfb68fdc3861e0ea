"""check_acl over every role × bucket, with and without explicit acceptFrom and handle overrides."""

from __future__ import annotations

import itertools

import pytest

from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy import Bucket, ReceiverView, Role, check_acl, classify, sender_handles

ME = "0" * 16
OWNER = "1" * 16
CHILD = "2" * 16
PEER_ID = "3" * 16
OTHER = "4" * 16

# Plain copy of the defaults, independent of the code under test.
DEFAULTS = {
    "primary": {"parent", "children", "peers", "agents", "external"},
    "orchestrator": {"children", "external", "peers"},
    "worker": {"parent"},
    "peer": {"peers", "external"},
}

# One representative sender per bucket, with the handle an acceptFrom entry would name it by (None: no handle
# can name it, because an unverified sender's name is only claimed).
SENDERS: dict[str, tuple[Sender, str | None]] = {
    "parent": (Sender(SenderClass.VERIFIED, OWNER, "boss", "a2a"), "boss"),
    "children": (Sender(SenderClass.VERIFIED, CHILD, "kid", "a2a"), CHILD),
    "peers": (Sender(SenderClass.VERIFIED, PEER_ID, "bob", "a2a"), "bob"),
    "agents": (Sender(SenderClass.VERIFIED, OTHER, "carol", "a2a"), OTHER),
    "external": (Sender(SenderClass.EXTERNAL, None, "@ci:build", "uds"), "@ci:build"),
    "unknown": (Sender(SenderClass.UNVERIFIED, None, "mallory", "uds"), None),
}


def view_for(role: Role, accept_from: frozenset[str] | None = None) -> ReceiverView:
    return ReceiverView(
        agent_id=ME,
        name="me",
        role=role,
        owner=OWNER,
        children=frozenset({CHILD}),
        peers=frozenset({PEER_ID}),
        accept_from=accept_from,
    )


def expected_acl(bucket: str, accept_from: set[str], handle_listed: bool) -> str | None:
    if bucket in accept_from:
        return None
    if handle_listed:
        return None
    return "acl:" + bucket


def test_representative_senders_classify_as_named() -> None:
    for bucket, (sender, _) in SENDERS.items():
        assert classify(sender, view_for(Role.WORKER)).value == bucket


@pytest.mark.parametrize(("role", "bucket"), list(itertools.product(Role, Bucket)), ids=str)
def test_role_defaults(role: Role, bucket: Bucket) -> None:
    sender, _ = SENDERS[bucket.value]
    got = check_acl(sender, bucket, view_for(role))
    assert got == expected_acl(bucket.value, DEFAULTS[role.value], handle_listed=False)


@pytest.mark.parametrize(("role", "bucket", "listed"), list(itertools.product(Role, Bucket, Bucket)), ids=str)
def test_explicit_single_bucket(role: Role, bucket: Bucket, listed: Bucket) -> None:
    # An explicit list replaces the role's defaults entirely: only the listed bucket passes.
    sender, _ = SENDERS[bucket.value]
    got = check_acl(sender, bucket, view_for(role, frozenset({listed.value})))
    assert got == expected_acl(bucket.value, {listed.value}, handle_listed=False)


@pytest.mark.parametrize(("role", "bucket"), list(itertools.product(Role, Bucket)), ids=str)
def test_empty_accept_from_refuses_all(role: Role, bucket: Bucket) -> None:
    sender, _ = SENDERS[bucket.value]
    assert check_acl(sender, bucket, view_for(role, frozenset())) == f"acl:{bucket.value}"


@pytest.mark.parametrize(("role", "bucket"), list(itertools.product(Role, Bucket)), ids=str)
def test_handle_override_on_top_of_defaults(role: Role, bucket: Bucket) -> None:
    sender, handle = SENDERS[bucket.value]
    # An unverified sender has no handle; listing its claimed name must not let it in.
    entry = handle if handle is not None else "mallory"
    accept_from = DEFAULTS[role.value] | {entry}
    got = check_acl(sender, bucket, view_for(role, frozenset(accept_from)))
    assert got == expected_acl(bucket.value, DEFAULTS[role.value], handle_listed=handle is not None)


@pytest.mark.parametrize(("role", "bucket"), list(itertools.product(Role, Bucket)), ids=str)
def test_handle_override_alone(role: Role, bucket: Bucket) -> None:
    sender, handle = SENDERS[bucket.value]
    entry = handle if handle is not None else "mallory"
    got = check_acl(sender, bucket, view_for(role, frozenset({entry})))
    assert got == expected_acl(bucket.value, set(), handle_listed=handle is not None)


@pytest.mark.parametrize(("role", "bucket"), list(itertools.product(Role, Bucket)), ids=str)
def test_someone_elses_handle_does_not_help(role: Role, bucket: Bucket) -> None:
    sender, _ = SENDERS[bucket.value]
    got = check_acl(sender, bucket, view_for(role, frozenset({"dave", "5" * 16, "@cron:nightly"})))
    assert got == f"acl:{bucket.value}"


VERIFIED_CAROL = Sender(SenderClass.VERIFIED, OTHER, "carol", "a2a")

NAMED_CASES: list[tuple[str, Sender, Bucket, Role, frozenset[str] | None, str | None]] = [
    (
        "worker allows agent by name",
        VERIFIED_CAROL,
        Bucket.AGENTS,
        Role.WORKER,
        frozenset({"parent", "carol"}),
        None,
    ),
    (
        "worker allows agent by id",
        VERIFIED_CAROL,
        Bucket.AGENTS,
        Role.WORKER,
        frozenset({"parent", OTHER}),
        None,
    ),
    (
        "worker opts in to one trigger",
        Sender(SenderClass.EXTERNAL, None, "@ci:build"),
        Bucket.EXTERNAL,
        Role.WORKER,
        frozenset({"parent", "@ci:build"}),
        None,
    ),
    (
        "other trigger still refused",
        Sender(SenderClass.EXTERNAL, None, "@ci:deploy"),
        Bucket.EXTERNAL,
        Role.WORKER,
        frozenset({"parent", "@ci:build"}),
        "acl:external",
    ),
    (
        "worker opts in to external bucket",
        Sender(SenderClass.EXTERNAL, None, "@ci:deploy"),
        Bucket.EXTERNAL,
        Role.WORKER,
        frozenset({"parent", "external"}),
        None,
    ),
    (
        "unverified claiming a listed name",
        Sender(SenderClass.UNVERIFIED, None, "carol"),
        Bucket.UNKNOWN,
        Role.PRIMARY,
        frozenset({"carol"}),
        "acl:unknown",
    ),
    (
        "unverified claiming a listed id",
        Sender(SenderClass.UNVERIFIED, OTHER, "carol"),
        Bucket.UNKNOWN,
        Role.PRIMARY,
        frozenset({OTHER}),
        "acl:unknown",
    ),
    (
        "unknown listed explicitly",
        Sender(SenderClass.UNVERIFIED, None, "mallory"),
        Bucket.UNKNOWN,
        Role.PRIMARY,
        frozenset({"unknown"}),
        None,
    ),
    (
        "primary default refuses unknown",
        Sender(SenderClass.UNVERIFIED),
        Bucket.UNKNOWN,
        Role.PRIMARY,
        None,
        "acl:unknown",
    ),
    # An entry spelled like a bucket is the bucket, never a handle: an agent named "children" gains nothing.
    (
        "agent named like a bucket",
        Sender(SenderClass.VERIFIED, OTHER, "children", "a2a"),
        Bucket.AGENTS,
        Role.ORCHESTRATOR,
        None,
        "acl:agents",
    ),
    (
        "verified with no agent_id has no handle",
        Sender(SenderClass.VERIFIED, None, "carol", "a2a"),
        Bucket.UNKNOWN,
        Role.PRIMARY,
        frozenset({"carol"}),
        "acl:unknown",
    ),
]


@pytest.mark.parametrize(
    ("sender", "bucket", "role", "accept_from", "expected"),
    [c[1:] for c in NAMED_CASES],
    ids=[c[0] for c in NAMED_CASES],
)
def test_named_cases(
    sender: Sender, bucket: Bucket, role: Role, accept_from: frozenset[str] | None, expected: str | None
) -> None:
    assert check_acl(sender, bucket, view_for(role, accept_from)) == expected


def test_sender_handles() -> None:
    assert sender_handles(VERIFIED_CAROL) == {"carol", OTHER}
    assert sender_handles(Sender(SenderClass.VERIFIED, OTHER)) == {OTHER}
    assert sender_handles(Sender(SenderClass.VERIFIED, None, "carol")) == frozenset()
    assert sender_handles(Sender(SenderClass.EXTERNAL, None, "@ci:build")) == {"@ci:build"}
    assert sender_handles(Sender(SenderClass.EXTERNAL)) == frozenset()
    assert sender_handles(Sender(SenderClass.UNVERIFIED, OTHER, "carol")) == frozenset()
