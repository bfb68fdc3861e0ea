"""Policy, hop guard and admission through the receiver chain.

A refused message is answered `rejected`, never injected, never journaled as received (only as a `rejected`
audit record without its body), and admission never evicts work it already accepted."""

from __future__ import annotations

import asyncio

import pytest

from crosstalk.core.ids import hop_entry
from crosstalk.core.states import State
from crosstalk.journal import records as R
from crosstalk.policy import Limits, Role
from tests.support.receiver import ALICE, ANON, CAROL, CI, inbound, msg, run, settle, wait_for


def _assert_rejected_only(rig, mid: str, reason: str) -> dict:
    """The message left exactly one `rejected` audit record and nothing else; nothing reached the fake."""
    recs = rig.records_for(mid)
    assert [r["type"] for r in recs] == [R.REJECTED]
    assert recs[0]["reason"] == reason
    assert "message" not in recs[0]  # an audit record carries no body
    assert mid not in rig.state.messages
    assert not any(w["message_id"] == mid for w in rig.fake.writes)
    return recs[0]


def test_external_to_worker_is_rejected_and_never_injected(make_rig):
    rig = make_rig(role=Role.WORKER, owner=ALICE.agent_id)
    m = msg("build finished")
    out = run(rig.receiver.receive(inbound(m, CI)))
    assert (out.state, out.reason) == (State.REJECTED, "acl:external")
    assert rig.fake.attempts == 0
    rec = _assert_rejected_only(rig, m.message_id, "acl:external")
    assert rec["sender"]["class"] == "external"
    assert rec["sender"]["name"] == "@ci:build"
    assert rec["transport"] == "uds"


def test_worker_hears_its_parent_only(make_rig):
    rig = make_rig(role=Role.WORKER, owner=ALICE.agent_id)
    m_parent = msg("from the parent")
    m_other = msg("from a stranger")

    async def body():
        return (
            await rig.receiver.receive(inbound(m_parent, ALICE)),
            await rig.receiver.receive(inbound(m_other, CAROL)),
        )

    parent, other = run(body())
    assert parent.state is State.ACCEPTED
    assert (other.state, other.reason) == (State.REJECTED, "acl:agents")
    assert [w["message_id"] for w in rig.fake.writes] == [m_parent.message_id]


def test_command_only_from_the_parent_to_its_worker(make_rig):
    rig = make_rig(role=Role.WORKER, owner=CAROL.agent_id)
    ok = msg("do the thing", kind="command")
    parent_on_uds = msg("do it over uds", kind="command")

    async def body():
        return (
            await rig.receiver.receive(inbound(ok, CAROL, "a2a")),
            await rig.receiver.receive(inbound(parent_on_uds, CAROL, "uds")),
        )

    a, b = run(body())
    assert a.state is State.ACCEPTED
    assert rig.fake.writes[0]["kind"] == "command"
    assert (b.state, b.reason) == (State.REJECTED, "kind:not_on_uds")
    assert len(rig.fake.writes) == 1


def test_command_from_a_non_owner_primary_is_rejected_not_downgraded(make_rig):
    """A non-owner sends command → rejected, never injected (not turned into an inform)."""
    rig = make_rig()
    m = msg("rm -rf /", kind="command")
    out = run(rig.receiver.receive(inbound(m, CAROL, "a2a")))
    assert (out.state, out.reason) == (State.REJECTED, "kind:command_needs_parent")
    _assert_rejected_only(rig, m.message_id, "kind:command_needs_parent")
    assert rig.fake.attempts == 0


@pytest.mark.parametrize("kind", ["ask", "command"])
def test_ask_or_command_over_uds_is_not_on_uds(make_rig, kind):
    rig = make_rig()
    m = msg("answer me", kind=kind)
    out = run(rig.receiver.receive(inbound(m, ALICE, "uds")))
    assert (out.state, out.reason) == (State.REJECTED, "kind:not_on_uds")
    rec = _assert_rejected_only(rig, m.message_id, "kind:not_on_uds")
    assert rec["kind"] == kind


def test_ask_needs_a_verified_sender(make_rig):
    rig = make_rig()
    m_ok = msg("question?", kind="ask")
    m_bad = msg("question from CI?", kind="ask")

    async def body():
        return (
            await rig.receiver.receive(inbound(m_ok, CAROL, "a2a")),
            await rig.receiver.receive(inbound(m_bad, CI, "a2a")),
        )

    ok, bad = run(body())
    assert ok.state is State.ACCEPTED
    assert (bad.state, bad.reason) == (State.REJECTED, "kind:ask_needs_verified")
    assert [w["kind"] for w in rig.fake.writes] == ["ask"]


def test_unverified_unnamed_sender_is_unknown_bucket_for_a_primary(make_rig):
    rig = make_rig()
    m = msg("hi from nowhere")
    out = run(rig.receiver.receive(inbound(m, ANON)))
    assert (out.state, out.reason) == (State.REJECTED, "acl:unknown")
    _assert_rejected_only(rig, m.message_id, "acl:unknown")


def test_external_inform_to_a_primary_is_labelled_by_its_tag(make_rig):
    rig = make_rig()
    m = msg("deploy done", from_="@someone:else")
    out = run(rig.receiver.receive(inbound(m, CI)))
    assert out.state is State.ACCEPTED
    (w,) = rig.fake.writes
    assert w["from"] == "@ci:build"  # the transport's tag, never the record's from
    assert w["sender_class"] == "external"
    assert 'sender-class="external"' in w["rendered"]


def test_oversize_text_is_rejected_and_nothing_is_received(make_rig):
    rig = make_rig()
    m = msg("x" * (64 * 1024 + 1))
    out = run(rig.receiver.receive(inbound(m)))
    assert (out.state, out.reason) == (State.REJECTED, "admission:text_too_large")
    rec = _assert_rejected_only(rig, m.message_id, "admission:text_too_large")
    assert rec["text_bytes"] == 64 * 1024 + 1
    assert rig.records_for(m.message_id, R.RECEIVED) == []


def test_text_exactly_at_the_limit_is_admitted(make_rig):
    rig = make_rig()
    m = msg("é" * (32 * 1024))  # 64 KiB of UTF-8 exactly
    out = run(rig.receiver.receive(inbound(m)))
    assert out.state is State.ACCEPTED


def test_hop_loop_with_our_own_entry(make_rig):
    rig = make_rig()
    other = hop_entry("0123456789abcdef")
    m = msg("came back round", hop_chain=(other, rig.identity.hop_entry))
    out = run(rig.receiver.receive(inbound(m, CAROL, "a2a")))
    assert (out.state, out.reason) == (State.REJECTED, "hop:loop")
    _assert_rejected_only(rig, m.message_id, "hop:loop")


def test_hop_repeat_and_overflow(make_rig):
    rig = make_rig()
    a = hop_entry("0123456789abcdef")
    repeat = msg("a→b→a", hop_chain=(a, hop_entry("fedcba9876543210"), a))
    long_chain = tuple(hop_entry(f"{i:016x}") for i in range(33))
    too_long = msg("far", hop_chain=long_chain)
    just_fits = msg("32 hops", hop_chain=long_chain[:32])

    async def body():
        return [await rig.receiver.receive(inbound(m, CAROL, "a2a")) for m in (repeat, too_long, just_fits)]

    outs = run(body())
    assert [(o.state, o.reason) for o in outs[:2]] == [
        (State.REJECTED, "hop:loop"),
        (State.REJECTED, "hop:too_long"),
    ]
    assert outs[2].state is State.ACCEPTED


def test_native_frames_carry_no_chain_to_check(make_rig):
    rig = make_rig()
    m = msg("native", hop_chain=(rig.identity.hop_entry,))
    out = run(rig.receiver.receive(inbound(m, ALICE, "uds", native=True)))
    assert out.state is State.ACCEPTED


def test_every_rejection_is_an_audit_record(make_rig):
    rig = make_rig(role=Role.WORKER, owner=ALICE.agent_id)
    cases = [
        (inbound(msg("ext"), CI), "acl:external"),
        (inbound(msg("anon"), ANON), "acl:unknown"),
        (inbound(msg("ask", kind="ask"), ALICE, "uds"), "kind:not_on_uds"),
        (inbound(msg("x" * 70000), ALICE), "admission:text_too_large"),
        (inbound(msg("loop", hop_chain=(rig.identity.hop_entry,)), ALICE, "a2a"), "hop:loop"),
    ]

    async def body():
        return [await rig.receiver.receive(i) for i, _ in cases]

    outs = run(body())
    assert [o.reason for o in outs] == [r for _, r in cases]
    assert all(o.state is State.REJECTED for o in outs)
    recs = rig.records()
    assert [r["type"] for r in recs] == [R.REJECTED] * len(cases)
    assert [r["reason"] for r in recs] == [r for _, r in cases]
    assert rig.fake.attempts == 0
    assert rig.receiver.stats.rejected == len(cases)


# ------------------------------------------------------------------ admission


def test_default_wait_limit_rejects_deterministically_and_never_evicts(make_rig):
    rig = make_rig(default="block", limits=Limits(max_default_waits=2))
    first, second = msg("wait 1"), msg("wait 2")
    extra = [msg(f"over {i}") for i in range(3)]

    async def body():
        t1 = asyncio.create_task(rig.receiver.receive(inbound(first, default_wait=True)))
        t2 = asyncio.create_task(rig.receiver.receive(inbound(second, default_wait=True)))
        await wait_for(lambda: len(rig.records_for(second.message_id, R.DISPATCH)) == 1)
        await wait_for(lambda: rig.fake.attempts == 2)
        over = [await settle(rig.receiver.receive(inbound(m, default_wait=True))) for m in extra]
        # Both accepted messages are still durable and owed an outcome while the receiver is stalled.
        for m in (first, second):
            assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH]
            assert rig.state.messages[m.message_id].state is State.DISPATCHING
        rig.fake.release()
        return await settle(t1), await settle(t2), over

    a, b, over = run(body())
    assert [(o.state, o.reason) for o in over] == [(State.REJECTED, "admission:default_waits")] * 3
    assert a.state is State.ACCEPTED and b.state is State.ACCEPTED
    assert {w["message_id"] for w in rig.fake.writes} == {first.message_id, second.message_id}
    for m in (first, second):
        assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH, R.OUTCOME]
    for m in extra:
        _assert_rejected_only(rig, m.message_id, "admission:default_waits")


def test_default_wait_slot_is_freed_after_completion(make_rig):
    rig = make_rig(limits=Limits(max_default_waits=1))

    async def body():
        return [await rig.receiver.receive(inbound(msg(f"seq {i}"), default_wait=True)) for i in range(5)]

    outs = run(body())
    assert all(o.state is State.ACCEPTED for o in outs)
    assert rig.receiver._default_waits == 0


def test_messages_that_do_not_wait_are_not_counted_against_waits(make_rig):
    rig = make_rig(default="block", limits=Limits(max_default_waits=1))
    w1, plain, w2 = msg("waits"), msg("fire and forget"), msg("waits too")

    async def body():
        t1 = asyncio.create_task(rig.receiver.receive(inbound(w1, default_wait=True)))
        await wait_for(lambda: rig.fake.attempts == 1)
        t2 = asyncio.create_task(rig.receiver.receive(inbound(plain)))
        await wait_for(lambda: rig.fake.attempts == 2)
        over = await settle(rig.receiver.receive(inbound(w2, default_wait=True)))
        rig.fake.release()
        return await settle(t1), await settle(t2), over

    a, b, over = run(body())
    assert (over.state, over.reason) == (State.REJECTED, "admission:default_waits")
    assert a.state is State.ACCEPTED and b.state is State.ACCEPTED


def test_pending_task_limit_rejects_and_never_evicts(make_rig):
    rig = make_rig(default="block", limits=Limits(max_pending_tasks=2))
    held = [msg("task 1"), msg("task 2")]
    over = msg("task 3")
    continuation = msg("continuation of an open task")  # creates no new task: not counted

    async def body():
        tasks = [asyncio.create_task(rig.receiver.receive(inbound(m, CAROL, "a2a", new_task=True))) for m in held]
        await wait_for(lambda: rig.fake.attempts == 2)
        rejected = await settle(rig.receiver.receive(inbound(over, CAROL, "a2a", new_task=True)))
        cont = asyncio.create_task(rig.receiver.receive(inbound(continuation, CAROL, "a2a")))
        await wait_for(lambda: rig.fake.attempts == 3)
        assert rig.state.pending_count() == 3
        rig.fake.release()
        done = [await settle(t) for t in tasks]
        return rejected, done, await settle(cont)

    rejected, done, cont = run(body())
    assert (rejected.state, rejected.reason) == (State.REJECTED, "admission:pending_tasks")
    assert [o.state for o in done] == [State.ACCEPTED, State.ACCEPTED]
    assert cont.state is State.ACCEPTED
    _assert_rejected_only(rig, over.message_id, "admission:pending_tasks")
    for m in held:
        assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH, R.OUTCOME]
    assert rig.state.pending_count() == 0


def test_open_ask_limit(make_rig):
    rig = make_rig(limits=Limits(max_open_asks=1))
    rig.state.apply({"type": R.OBLIGATION, "message_id": "earlier-ask", "state": "open"})
    ask = msg("another question?", kind="ask")
    inform = msg("just so you know")

    async def body():
        return (
            await rig.receiver.receive(inbound(ask, CAROL, "a2a")),
            await rig.receiver.receive(inbound(inform, CAROL, "a2a")),
        )

    a, i = run(body())
    assert (a.state, a.reason) == (State.REJECTED, "admission:open_asks")
    assert i.state is State.ACCEPTED


def test_rejected_for_admission_can_be_retried_once_there_is_room(make_rig):
    rig = make_rig(default="block", limits=Limits(max_default_waits=1))
    first, later = msg("first"), msg("later")

    async def body():
        t1 = asyncio.create_task(rig.receiver.receive(inbound(first, default_wait=True)))
        await wait_for(lambda: rig.fake.attempts == 1)
        refused = await settle(rig.receiver.receive(inbound(later, default_wait=True)))
        rig.fake.release()
        await settle(t1)
        retried = await settle(rig.receiver.receive(inbound(later, default_wait=True)))
        return refused, retried

    refused, retried = run(body())
    assert refused.state is State.REJECTED
    assert retried.state is State.ACCEPTED and not retried.evidence.get("duplicate")
    assert [r["type"] for r in rig.records_for(later.message_id)] == [
        R.REJECTED,
        R.RECEIVED,
        R.DISPATCH,
        R.OUTCOME,
    ]
