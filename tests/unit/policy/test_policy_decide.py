"""evaluate: hop guard → classify → acl → kind table → admission, first failure wins."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from crosstalk.core.ids import hop_entry
from crosstalk.core.kinds import Kind
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy import Bucket, Decision, Limits, Load, ReceiverView, Role, evaluate
from crosstalk.policy.errors import PolicyError

ME = "0" * 16
OWNER = "1" * 16
OTHER = "4" * 16
SELF_ENTRY = hop_entry(ME)
OWNER_SENDER = Sender(SenderClass.VERIFIED, OWNER, "boss", "a2a")
NON_OWNER = Sender(SenderClass.VERIFIED, OTHER, "carol", "a2a")
UNVERIFIED = Sender(SenderClass.UNVERIFIED, None, "mallory", "uds")
EXTERNAL = Sender(SenderClass.EXTERNAL, None, "@ci:build", "uds")
WORKER = ReceiverView(ME, "me", Role.WORKER, OWNER)
PRIMARY = ReceiverView(ME, "me")
SMALL = Limits(max_text_bytes=10, max_pending_tasks=1, max_open_asks=1, max_default_waits=1)


def run(**overrides: Any) -> Decision:
    args: dict[str, Any] = {
        "kind": Kind.INFORM,
        "text_bytes": 5,
        "sender": OWNER_SENDER,
        "view": WORKER,
        "transport": "a2a",
        "hop_chain": (hop_entry(OWNER),),
        "self_entry": SELF_ENTRY,
        "load": Load(),
        "limits": SMALL,
        "new_task": True,
        "default_wait": False,
    }
    args.update(overrides)
    return evaluate(**args)


def test_accepts_owner_command_to_worker() -> None:
    assert run(kind=Kind.COMMAND) == Decision(ok=True, reason=None, bucket=Bucket.PARENT)


def test_first_failure_wins_in_order() -> None:
    # Start with a message that fails every step, then fix one step at a time.
    every_failure: dict[str, Any] = {
        "hop_chain": (SELF_ENTRY,),
        "sender": NON_OWNER,
        "kind": Kind.COMMAND,
        "text_bytes": 11,
        "load": Load(pending_tasks=1),
    }
    assert run(**every_failure) == Decision(False, "hop:loop", Bucket.AGENTS)
    every_failure["hop_chain"] = ()
    assert run(**every_failure) == Decision(False, "acl:agents", Bucket.AGENTS)
    every_failure["view"] = ReceiverView(ME, "me", Role.WORKER, OWNER, accept_from=frozenset({"parent", "agents"}))
    assert run(**every_failure) == Decision(False, "kind:command_needs_parent", Bucket.AGENTS)
    every_failure["kind"] = Kind.INFORM
    assert run(**every_failure) == Decision(False, "admission:text_too_large", Bucket.AGENTS)
    every_failure["text_bytes"] = 10
    assert run(**every_failure) == Decision(False, "admission:pending_tasks", Bucket.AGENTS)
    every_failure["load"] = Load()
    assert run(**every_failure) == Decision(True, None, Bucket.AGENTS)


def test_hop_too_long_before_acl() -> None:
    chain = tuple(hop_entry(f"{i + 10:016x}") for i in range(33))
    assert run(hop_chain=chain, sender=UNVERIFIED) == Decision(False, "hop:too_long", Bucket.UNKNOWN)


def test_uds_kind_rule_after_acl() -> None:
    # An accepted sender asking over uds is refused by the kind table; an unaccepted one by the ACL first.
    assert run(kind=Kind.ASK, transport="uds").reason == "kind:not_on_uds"
    assert run(kind=Kind.ASK, transport="uds", sender=UNVERIFIED).reason == "acl:unknown"


NAMED: list[tuple[str, dict[str, Any], str | None, Bucket]] = [
    # A non-owner primary sends command to a subagent → rejected.
    ("non-owner command to worker", {"kind": Kind.COMMAND, "sender": NON_OWNER}, "acl:agents", Bucket.AGENTS),
    (
        "non-owner command to worker that accepts agents",
        {
            "kind": Kind.COMMAND,
            "sender": NON_OWNER,
            "view": ReceiverView(ME, "me", Role.WORKER, OWNER, accept_from=frozenset({"agents"})),
        },
        "kind:command_needs_parent",
        Bucket.AGENTS,
    ),
    (
        "command to a primary",
        {"kind": Kind.COMMAND, "sender": NON_OWNER, "view": PRIMARY},
        "kind:command_needs_parent",
        Bucket.AGENTS,
    ),
    ("owner command over uds", {"kind": Kind.COMMAND, "transport": "uds"}, "kind:not_on_uds", Bucket.PARENT),
    # Unverified ask rejected, inform accepted. On a primary the external bucket is accepted...
    (
        "external ask to primary",
        {"kind": Kind.ASK, "sender": EXTERNAL, "view": PRIMARY, "transport": "bus"},
        "kind:ask_needs_verified",
        Bucket.EXTERNAL,
    ),
    (
        "external inform to primary",
        {"sender": EXTERNAL, "view": PRIMARY, "transport": "uds"},
        None,
        Bucket.EXTERNAL,
    ),
    # ...while a plain unverified sender is unknown, which no role accepts unless it opts in.
    ("unverified inform to primary", {"sender": UNVERIFIED, "view": PRIMARY}, "acl:unknown", Bucket.UNKNOWN),
    (
        "unverified inform to primary allowing unknown",
        {"sender": UNVERIFIED, "view": ReceiverView(ME, "me", accept_from=frozenset({"unknown"}))},
        None,
        Bucket.UNKNOWN,
    ),
    (
        "unverified ask to primary allowing unknown",
        {
            "kind": Kind.ASK,
            "sender": UNVERIFIED,
            "view": ReceiverView(ME, "me", accept_from=frozenset({"unknown"})),
        },
        "kind:ask_needs_verified",
        Bucket.UNKNOWN,
    ),
    ("external to worker", {"sender": EXTERNAL}, "acl:external", Bucket.EXTERNAL),
    (
        "ask at the open-ask limit",
        {"kind": Kind.ASK, "load": Load(open_asks=1), "new_task": False},
        "admission:open_asks",
        Bucket.PARENT,
    ),
    (
        "default wait at limit",
        {"load": Load(default_waits=1), "default_wait": True},
        "admission:default_waits",
        Bucket.PARENT,
    ),
    ("ping passes", {"kind": Kind.PING, "transport": "uds"}, None, Bucket.PARENT),
]


@pytest.mark.parametrize(("overrides", "reason", "bucket"), [c[1:] for c in NAMED], ids=[c[0] for c in NAMED])
def test_named(overrides: dict[str, Any], reason: str | None, bucket: Bucket) -> None:
    assert run(**overrides) == Decision(ok=reason is None, reason=reason, bucket=bucket)


SENDERS = {"owner": OWNER_SENDER, "non_owner": NON_OWNER, "unverified": UNVERIFIED, "external": EXTERNAL}


@pytest.mark.parametrize(
    ("kind", "who", "role", "transport"),
    list(itertools.product(Kind, SENDERS, Role, ["uds", "a2a"])),
    ids=str,
)
def test_product_matches_hand_written_rules(kind: Kind, who: str, role: Role, transport: str) -> None:
    view = ReceiverView(ME, "me", role, OWNER if role is Role.WORKER else None)
    bucket = {
        "owner": "parent" if role is Role.WORKER else "agents",
        "non_owner": "agents",
        "unverified": "unknown",
        "external": "external",
    }[who]
    accepts = {
        "primary": {"parent", "children", "peers", "agents", "external"},
        "orchestrator": {"children", "external", "peers"},
        "worker": {"parent"},
        "peer": {"peers", "external"},
    }[role.value]
    if bucket not in accepts:
        reason: str | None = f"acl:{bucket}"
    elif transport == "uds" and kind.value in ("ask", "command"):
        reason = "kind:not_on_uds"
    elif kind.value == "command" and not (bucket == "parent" and role.value == "worker"):
        reason = "kind:command_needs_parent"
    elif kind.value == "ask" and who in ("unverified", "external"):
        reason = "kind:ask_needs_verified"
    else:
        reason = None
    got = run(kind=kind, sender=SENDERS[who], view=view, transport=transport)
    assert got == Decision(ok=reason is None, reason=reason, bucket=Bucket(bucket))


def test_decision_consistency_enforced() -> None:
    with pytest.raises(PolicyError):
        Decision(ok=True, reason="acl:unknown", bucket=Bucket.UNKNOWN)
    with pytest.raises(PolicyError):
        Decision(ok=False, reason=None, bucket=Bucket.UNKNOWN)


NOTICE = Sender(SenderClass.VERIFIED, ME, "crosstalk", "crosstalk")


def test_our_own_notice_passes_any_role_but_only_as_an_inform_within_the_size_cap() -> None:
    full = Load(pending_tasks=9, open_asks=9, default_waits=9)  # a notice never counts as load
    for view in (WORKER, ReceiverView(ME, "me", Role.PEER), PRIMARY):
        assert run(sender=NOTICE, view=view, transport="crosstalk", load=full).ok
    assert run(sender=NOTICE, transport="crosstalk", kind=Kind.COMMAND).reason == "kind:notice_inform_only"
    assert run(sender=NOTICE, transport="crosstalk", text_bytes=11).reason == "admission:text_too_large"
    # Not a notice: another agent on the notice transport, or our own id over a real transport.
    assert run(sender=Sender(SenderClass.VERIFIED, OTHER, "crosstalk", "crosstalk"), transport="crosstalk").reason == (
        "acl:agents"
    )
    assert run(sender=Sender(SenderClass.VERIFIED, ME, "me", "uds"), transport="uds").reason == "acl:agents"
