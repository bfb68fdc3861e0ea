"""Dedupe on (verified sender, message_id): a retry returns the prior state, concurrent
duplicates inject once, a message_id belongs to one sender, native frames are exempt."""

from __future__ import annotations

import asyncio

import pytest

from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import SEND_STATES, State
from crosstalk.journal import records as R
from tests.support.receiver import ALICE, CAROL, CI, inbound, msg, run, settle, wait_for
from tests.support.waiting import until_async


def test_second_delivery_returns_prior_state_without_injection(make_rig):
    rig = make_rig(script=["queue"])
    m = msg("once")

    async def body():
        return await rig.receiver.receive(inbound(m)), await rig.receiver.receive(inbound(m))

    first, second = run(body())
    assert first.state is State.QUEUED
    assert second.state is State.QUEUED
    assert second.message_id == m.message_id
    assert second.evidence == {"duplicate": True}
    assert len(rig.fake.writes) == 1 and rig.fake.attempts == 1
    # The duplicate adds nothing to the journal.
    assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH, R.OUTCOME]
    assert rig.receiver.stats.duplicates == 1


@pytest.mark.parametrize("step", ["accept", "refuse", "disconnect", "malformed"])
def test_retry_returns_prior_state_for_every_branch(make_rig, step):
    rig = make_rig(script=[step], default="accept")
    m = msg("retry me")

    async def body():
        return [await rig.receiver.receive(inbound(m)) for _ in range(3)]

    outs = run(body())
    assert len({o.state for o in outs}) == 1
    assert outs[1].evidence == {"duplicate": True}
    assert rig.fake.attempts == 1


def test_duplicate_of_a_different_text_still_returns_prior_state(make_rig):
    rig = make_rig()
    mid = msg().message_id

    async def body():
        a = await rig.receiver.receive(inbound(msg("first", mid=mid)))
        b = await rig.receiver.receive(inbound(msg("second, same id", mid=mid)))
        return a, b

    a, b = run(body())
    assert a.state is b.state is State.ACCEPTED
    assert [w["text"] for w in rig.fake.writes] == ["first"]


def test_concurrent_duplicates_inject_once(make_rig):
    rig = make_rig(default="block")
    m = msg("ten at once")

    async def body():
        return await settle(_gather_released(rig, [inbound(m) for _ in range(10)]))

    outs = run(body())
    assert len(rig.fake.writes) == 1 and rig.fake.attempts == 1
    firsts = [o for o in outs if not o.evidence.get("duplicate")]
    assert len(firsts) == 1  # the nine others answer the first's outcome, marked as duplicates
    assert all(
        o == firsts[0].with_(evidence={**firsts[0].evidence, "duplicate": True}) for o in outs if o not in firsts
    )
    assert firsts[0].state is State.ACCEPTED
    assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH, R.OUTCOME]


async def _gather_released(rig, inbounds):
    tasks = [asyncio.create_task(rig.receiver.receive(i)) for i in inbounds]
    await wait_for(rig.fake.blocked)
    await asyncio.sleep(0.02)  # steers the others to arrive while the first blocks; no event marks a waiting duplicate
    rig.fake.release()
    return await asyncio.gather(*tasks)


def test_duplicates_arriving_while_the_first_is_blocked_wait_for_its_answer(make_rig):
    """A duplicate that arrives after the first is journaled but before its outcome must not answer the
    journal-internal state `dispatching`: it waits and answers what the first one answers."""
    rig = make_rig(default="block")
    m = msg("slow harness")

    async def body():
        first = asyncio.create_task(rig.receiver.receive(inbound(m)))
        await wait_for(rig.fake.blocked)
        assert rig.state.messages[m.message_id].state is State.DISPATCHING
        dups = [asyncio.create_task(rig.receiver.receive(inbound(m))) for _ in range(10)]
        await asyncio.sleep(0.05)  # what is tested is an absence: no duplicate answers while the first blocks
        assert not any(d.done() for d in dups), "a duplicate answered before the first one finished"
        rig.fake.release()
        return await settle(first), await settle(asyncio.gather(*dups))

    first, dups = run(body())
    assert first.state is State.ACCEPTED
    assert all(d == first.with_(evidence={**first.evidence, "duplicate": True}) for d in dups)
    assert len(rig.fake.writes) == 1 and rig.fake.attempts == 1
    assert rig.receiver.stats.duplicates == 10


def test_a_duplicate_waiting_on_a_first_copy_that_fails_is_answered_unknown(make_rig):
    """The first copy ends in an exception (here: its connection cancelled as the agent closes) after it may have
    reached the session: a duplicate waiting for its answer is answered unknown, never handed a CancelledError that
    its ingress would take for its own cancellation (and close its sender's connection without a word)."""
    rig = make_rig(default="block")
    m = msg("first copy fails")

    async def body():
        first = asyncio.create_task(rig.receiver.receive(inbound(m)))
        await wait_for(rig.fake.blocked)
        dup = asyncio.create_task(rig.receiver.receive(inbound(m)))
        # Counted in the same event-loop step in which it starts waiting for the first copy's answer.
        await until_async(lambda: rig.receiver.stats.duplicates == 1, "the duplicate waiting")
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await settle(dup)

    out = run(body())
    assert (out.message_id, out.state) == (m.message_id, State.UNKNOWN)
    assert out.evidence == {"duplicate": True} and out.reason == "first copy failed: CancelledError"


def test_same_message_id_from_another_sender_is_rejected(make_rig):
    rig = make_rig()
    m = msg("mine")

    async def body():
        a = await rig.receiver.receive(inbound(m, ALICE))
        b = await rig.receiver.receive(inbound(m, CAROL))
        c = await rig.receiver.receive(inbound(m, CI))
        return a, b, c

    a, b, c = run(body())
    assert a.state is State.ACCEPTED
    assert (b.state, b.reason) == (State.REJECTED, "message_id_in_use")
    assert (c.state, c.reason) == (State.REJECTED, "message_id_in_use")
    assert len(rig.fake.writes) == 1
    assert rig.fake.writes[0]["from"] == "alice"
    rejected = rig.records_for(m.message_id, R.REJECTED)
    assert [r["reason"] for r in rejected] == ["message_id_in_use", "message_id_in_use"]
    # The first sender's entry is untouched.
    assert rig.state.messages[m.message_id].sender["agent_id"] == ALICE.agent_id


def test_same_message_id_from_two_senders_at_once_injects_once(make_rig):
    """Two senders racing one message_id: one owns it, the other is refused; never two writes."""
    rig = make_rig(default="block")
    m = msg("contested id")

    async def body():
        return await settle(_gather_released(rig, [inbound(m, ALICE), inbound(m, CAROL)]))

    a, c = run(body())
    states = sorted([a.state.value, c.state.value])
    assert states == ["accepted", "rejected"]
    assert {a.reason, c.reason} >= {"message_id_in_use"}
    assert len(rig.fake.writes) == 1
    assert len(rig.records_for(m.message_id, R.RECEIVED)) == 1


def test_same_sender_name_different_class_is_a_different_sender(make_rig):
    """The dedupe key is the transport-proven identity: an unverified 'alice' is not verified alice."""
    rig = make_rig()
    m = msg("who am I")
    forged = Sender(SenderClass.EXTERNAL, None, "@alice:x", "uds")

    async def body():
        a = await rig.receiver.receive(inbound(m, ALICE))
        b = await rig.receiver.receive(inbound(m, forged))
        return a, b

    a, b = run(body())
    assert a.state is State.ACCEPTED
    assert (b.state, b.reason) == (State.REJECTED, "message_id_in_use")
    assert len(rig.fake.writes) == 1


def test_native_frames_are_exempt_from_dedupe(make_rig):
    rig = make_rig()
    text = "identical repeated text is legal"

    async def body():
        outs = []
        for _ in range(3):
            outs.append(await rig.receiver.receive(inbound(msg(text), ALICE, "uds", native=True)))
        return outs

    outs = run(body())
    assert [o.state for o in outs] == [State.ACCEPTED] * 3
    assert len({o.message_id for o in outs}) == 3
    assert [w["text"] for w in rig.fake.writes] == [text] * 3
    for o in outs:
        (rec,) = rig.records_for(o.message_id, R.RECEIVED)
        assert rec["native"] is True
        assert rec["dedupe_key"] is None
    assert rig.state.dedupe == {}


def test_native_frame_with_a_reused_id_is_not_deduped(make_rig):
    """Even the same record twice (same id) goes through the chain twice when native: there is no key."""
    rig = make_rig()
    m = msg("native twice")

    async def body():
        return [await rig.receiver.receive(inbound(m, ALICE, "uds", native=True)) for _ in range(2)]

    outs = run(body())
    assert [o.state for o in outs] == [State.ACCEPTED, State.ACCEPTED]
    assert len(rig.fake.writes) == 2
    assert rig.receiver.stats.duplicates == 0


def test_rejected_message_is_not_remembered_by_dedupe(make_rig):
    """A rejection records no dedupe key: a later valid message with the same id is judged afresh."""
    rig = make_rig()
    m_bad = msg("x" * (64 * 1024 + 1))
    m_ok = msg("fits now", mid=m_bad.message_id)

    async def body():
        return await rig.receiver.receive(inbound(m_bad)), await rig.receiver.receive(inbound(m_ok))

    bad, ok = run(body())
    assert (bad.state, bad.reason) == (State.REJECTED, "admission:text_too_large")
    assert ok.state is State.ACCEPTED and not ok.evidence.get("duplicate")
    assert len(rig.fake.writes) == 1


def test_retry_after_a_failed_outcome_write_is_unknown_not_dispatching(make_rig):
    """Only a durable outcome settles a message; a retry of one whose outcome write failed must answer a send
    state (unknown), never the journal-internal `dispatching`, and must not inject again."""
    from crosstalk.journal.writer import FsOps
    from tests.support.receiver import FlakyFsync

    rig = make_rig(fs=FsOps(fsync=FlakyFsync({2})))
    m = msg("outcome lost")

    async def body():
        return await rig.receiver.receive(inbound(m)), await rig.receiver.receive(inbound(m))

    first, retry = run(body())
    assert first.state is State.UNKNOWN
    assert retry.state in SEND_STATES
    assert retry.state is State.UNKNOWN
    assert len(rig.fake.writes) == 1


def test_a_retry_of_a_message_whose_body_was_let_go_is_still_a_duplicate(make_rig):
    """The state keeps only the newest settled messages whole (journal/window.py); an older one's retry is answered
    from the dedupe window, never injected again, and its id stays taken for any other sender."""
    rig = make_rig()
    rig.state.max_settled = 4
    first = msg("the first")

    async def body():
        out = [await rig.receiver.receive(inbound(first))]
        for i in range(40):
            out.append(await rig.receiver.receive(inbound(msg(f"later {i}"))))
        assert first.message_id not in rig.state.messages  # let go: only its dedupe answer is left
        retry = await rig.receiver.receive(inbound(first))
        stolen = await rig.receiver.receive(inbound(first, CAROL))
        return out, retry, stolen

    out, retry, stolen = run(body())
    assert {o.state for o in out} == {State.ACCEPTED}
    assert retry.state is State.ACCEPTED and retry.evidence == {"duplicate": True}
    assert stolen.state is State.REJECTED and stolen.reason == "message_id_in_use"
    assert [w["message_id"] for w in rig.fake.writes].count(first.message_id) == 1
