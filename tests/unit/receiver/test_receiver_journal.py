"""Journal gating and restart reconciliation at the receiver level.

No acknowledgement outruns the journal: a failed append before the harness write answers unreachable with zero
writes; after it, unknown with exactly one write. On replay, nothing is ever re-injected.
"""

from __future__ import annotations

import threading
import time

import pytest

from crosstalk.core.states import State
from crosstalk.journal import records as R
from crosstalk.journal.codec import read_journal
from crosstalk.journal.replay import JournalState
from crosstalk.journal.writer import FsOps
from crosstalk.policy import Role
from tests.support.receiver import (
    AGENT_NAME,
    ALICE,
    CI,
    SESSION_REF,
    FlakyFsync,
    inbound,
    msg,
    run,
)
from tests.support.waiting import until_async

# ------------------------------------------------------------------ journal gating


def test_failed_received_append_is_unreachable_with_zero_writes(make_rig):
    fsync = FlakyFsync({1})
    rig = make_rig(fs=FsOps(fsync=fsync))
    m = msg("not durable")
    out = run(rig.receiver.receive(inbound(m)))
    assert (out.state, out.reason) == (State.UNREACHABLE, "journal_write_failed")
    assert rig.fake.attempts == 0 and rig.fake.writes == []
    # The failed batch was truncated back: nothing of it is in the file or in memory.
    assert rig.records_for(m.message_id) == []
    assert rig.path.stat().st_size == 0
    assert m.message_id not in rig.state.messages
    assert rig.state.dedupe == {}


def test_after_a_failed_received_append_a_retry_delivers_once(make_rig):
    rig = make_rig(fs=FsOps(fsync=FlakyFsync({1})))
    m = msg("retry after disk error")

    async def body():
        return await rig.receiver.receive(inbound(m)), await rig.receiver.receive(inbound(m))

    first, retry = run(body())
    assert first.state is State.UNREACHABLE
    assert retry.state is State.ACCEPTED and not retry.evidence.get("duplicate")
    assert len(rig.fake.writes) == 1
    assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH, R.OUTCOME]


def test_failed_write_syscall_is_also_unreachable(make_rig):
    import os

    calls = {"n": 0}

    def bad_write(fd, data):
        calls["n"] += 1
        if calls["n"] == 1:
            os.write(fd, bytes(data[:7]))  # a short write, then the disk fails
            raise OSError(28, "No space left on device (injected)")
        return os.write(fd, data)

    rig = make_rig(fs=FsOps(write=bad_write))
    m = msg("disk full")
    out = run(rig.receiver.receive(inbound(m)))
    assert (out.state, out.reason) == (State.UNREACHABLE, "journal_write_failed")
    assert rig.fake.writes == []
    # The partial line was truncated back, so it cannot glue onto the next record.
    assert rig.path.stat().st_size == 0
    m2 = msg("after recovery")
    assert run(rig.receiver.receive(inbound(m2))).state is State.ACCEPTED
    assert read_journal(rig.path).bad_lines == 0


def test_failed_outcome_append_is_unknown_with_exactly_one_write(make_rig):
    rig = make_rig(fs=FsOps(fsync=FlakyFsync({2})))
    m = msg("outcome lost")
    out = run(rig.receiver.receive(inbound(m)))
    assert (out.state, out.reason) == (State.UNKNOWN, "journal_write_failed_after_dispatch")
    assert len(rig.fake.writes) == 1
    assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH]
    assert rig.receiver.stats.injected == 0


def test_rejections_need_no_fsync(make_rig):
    """An audit record acknowledges nothing: it is written without waiting for fsync."""
    fsync = FlakyFsync(set())
    rig = make_rig(fs=FsOps(fsync=fsync))
    m = msg("anon", kind="inform")
    from tests.support.receiver import ANON

    out = run(rig.receiver.receive(inbound(m, ANON)))
    assert out.state is State.REJECTED
    assert [r["type"] for r in rig.records()] == [R.REJECTED]
    assert fsync.calls == 0


# ------------------------------------------------------------------ reconcile after restart


def _seed_journal(make_rig, records):
    """Write records through a journal, close it, and return a fresh rig that replayed them."""
    first = make_rig()
    first.journal.append_many(records)
    first.close()
    return first


def _bind(session_ref: str = SESSION_REF) -> dict:
    return R.binding("inst-old", session_ref, None)


def _received(m, sender, session_ref=SESSION_REF, transport="uds"):
    return R.received(m, sender, dedupe_key=sender.dedupe_key, transport=transport, bind=_bind(session_ref))


def test_claimed_without_outcome_becomes_unknown_and_is_never_injected(make_rig):
    m = msg("crashed mid dispatch")
    _seed_journal(make_rig, [_received(m, ALICE), R.dispatch(m.message_id, _bind())])
    rig = make_rig()
    assert rig.state.messages[m.message_id].state is State.DISPATCHING
    written = rig.receiver.reconcile()
    assert [(r["message_id"], r["state"], r["reason"], r.get("reconciled")) for r in written] == [
        (m.message_id, "unknown", "crashed_during_dispatch", True)
    ]
    assert rig.fake.attempts == 0
    assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH, R.OUTCOME]
    # A retry of the pre-restart id answers the prior state; zero injections.
    retry = run(rig.receiver.receive(inbound(m, ALICE)))
    assert (retry.state, retry.evidence) == (State.UNKNOWN, {"duplicate": True})
    assert rig.fake.attempts == 0


def test_received_without_claim_from_external_to_primary_is_recovered(make_rig):
    m = msg("journaled then crashed")
    _seed_journal(make_rig, [_received(m, CI)])
    rig = make_rig()
    (rec,) = rig.receiver.reconcile()
    assert (rec["state"], rec["reason"], rec["reconciled"]) == ("recovered", "journaled_before_crash", True)
    assert rig.state.messages[m.message_id].state is State.RECOVERED
    assert rig.state.messages[m.message_id].unresolved  # it surfaces in the mailbox
    assert rig.fake.attempts == 0


def test_received_without_claim_failing_policy_now_is_rejected(make_rig):
    m = msg("was fine for a primary")
    _seed_journal(make_rig, [_received(m, CI)])
    rig = make_rig(role=Role.WORKER, owner=ALICE.agent_id)  # restarted as a worker
    (rec,) = rig.receiver.reconcile()
    assert (rec["state"], rec["reason"]) == ("rejected", "acl:external")
    assert not rig.state.messages[m.message_id].unresolved
    assert rig.fake.attempts == 0


def test_received_without_claim_too_large_is_rejected(make_rig):
    m = msg("y" * (64 * 1024 + 10))
    _seed_journal(make_rig, [_received(m, CI)])
    rig = make_rig()
    (rec,) = rig.receiver.reconcile()
    assert (rec["state"], rec["reason"]) == ("rejected", "admission:text_too_large")


@pytest.mark.parametrize("claimed", [True, False])
def test_records_bound_to_another_conversation_are_unreachable(make_rig, claimed):
    m = msg("for the old conversation")
    recs = [_received(m, CI, session_ref="sess-old")]
    if claimed:
        recs.append(R.dispatch(m.message_id, _bind("sess-old")))
    _seed_journal(make_rig, recs)
    rig = make_rig()
    (rec,) = rig.receiver.reconcile()
    assert (rec["state"], rec["reason"]) == ("unreachable", "bound_to_another_conversation")
    assert rig.fake.attempts == 0


def test_unreadable_unclaimed_record_is_rejected(make_rig):
    bad = {
        "type": R.RECEIVED,
        "ts": time.time(),
        "binding": _bind(),
        "message": {"message_id": "m-1"},
        "sender": {"class": "external", "name": "@ci:x"},
        "dedupe_key": "external:@ci:x",
        "transport": "uds",
    }
    _seed_journal(make_rig, [bad])
    rig = make_rig()
    (rec,) = rig.receiver.reconcile()
    assert (rec["state"], rec["reason"]) == ("rejected", "unreadable_record")


def test_settled_messages_are_left_alone_and_reconcile_is_idempotent(make_rig):
    done = msg("delivered")
    pending = msg("dispatching")
    _seed_journal(
        make_rig,
        [
            _received(done, ALICE),
            R.dispatch(done.message_id, _bind()),
            R.outcome(done.message_id, State.ACCEPTED, None, _bind()),
            _received(pending, ALICE),
            R.dispatch(pending.message_id, _bind()),
        ],
    )
    rig = make_rig()
    assert [r["message_id"] for r in rig.receiver.reconcile()] == [pending.message_id]
    assert rig.receiver.reconcile() == []
    assert rig.state.messages[done.message_id].state is State.ACCEPTED
    retry = run(rig.receiver.receive(inbound(done, ALICE)))
    assert (retry.state, retry.evidence) == (State.ACCEPTED, {"duplicate": True})
    assert rig.fake.attempts == 0


def test_torn_trailing_line_is_dropped_on_replay(make_rig):
    good = msg("complete")
    torn = msg("torn")
    first = _seed_journal(
        make_rig,
        [
            _received(good, ALICE),
            R.dispatch(good.message_id, _bind()),
            R.outcome(good.message_id, State.ACCEPTED, None, _bind()),
        ],
    )
    line = R.received(torn, ALICE, dedupe_key=ALICE.dedupe_key, transport="uds", bind=_bind())
    import json

    with open(first.path, "ab") as f:
        f.write(json.dumps(line).encode()[:-20])  # a crash mid-append: no newline
    rig = make_rig()
    assert rig.read.torn_tail_bytes > 0
    assert torn.message_id not in rig.state.messages
    assert good.message_id in rig.state.messages
    assert rig.receiver.reconcile() == []
    # The torn bytes were cut, so the next record starts on a clean line.
    out = run(rig.receiver.receive(inbound(torn, ALICE)))
    assert out.state is State.ACCEPTED
    replayed = JournalState.replay(read_journal(rig.path).records)
    assert replayed.messages[torn.message_id].state is State.ACCEPTED
    assert read_journal(rig.path).bad_lines == 0


def test_replay_restores_dedupe_for_every_state(make_rig):
    first = make_rig(script=["accept", "queue", "refuse", "disconnect"])
    msgs = [msg(f"m{i}") for i in range(4)]

    async def body():
        return [await first.receiver.receive(inbound(m, CI)) for m in msgs]

    before = run(body())
    first.close()
    rig = make_rig()
    assert rig.receiver.reconcile() == []

    async def again():
        return [await rig.receiver.receive(inbound(m, CI)) for m in msgs]

    after = run(again())
    assert [o.state for o in after] == [o.state for o in before]
    assert all(o.evidence == {"duplicate": True} for o in after)
    assert rig.fake.attempts == 0
    assert AGENT_NAME == "bob"


# ------------------------------------------------------------------ cancellation


def test_a_cancelled_receive_mid_append_does_not_wedge_the_journal(make_rig, monkeypatch):
    """A caller that gives up while its append is being fsynced must not kill the journal's flusher thread."""
    import asyncio
    import os

    from crosstalk.journal import writer

    # The flusher's path: an append its caller fsyncs itself (writer._inline_ok) has no await to be cancelled at.
    monkeypatch.setattr(writer, "INLINE_MAX_FSYNC_S", -1.0)

    in_fsync, fsynced = threading.Event(), threading.Event()

    def slow_fsync(fd):
        in_fsync.set()
        time.sleep(0.2)  # a slow disk: the caller gives up meanwhile
        os.fsync(fd)
        fsynced.set()

    rig = make_rig(fs=FsOps(fsync=slow_fsync))
    gave_up, later = msg("gave up"), msg("after the cancel")

    async def body():
        in_fsync.clear()  # from here on, the fsyncs are this append's
        fsynced.clear()
        task = asyncio.create_task(rig.receiver.receive(inbound(gave_up)))
        await until_async(in_fsync.is_set, "the receive inside the journal append")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until_async(fsynced.is_set, "the abandoned append's fsync done")
        return await asyncio.wait_for(rig.receiver.receive(inbound(later)), 5)

    out = run(body())
    assert rig.journal._thread.is_alive()
    assert out.state is State.ACCEPTED
    assert [w["message_id"] for w in rig.fake.writes] == [later.message_id]


def test_a_cancelled_receive_mid_injection_is_unknown_on_retry(make_rig):
    """Cancelled inside the harness write: the claim is durable, the outcome is not; a retry answers unknown and
    never writes again."""
    import asyncio

    rig = make_rig(script=["block"])
    m = msg("cut off")

    async def body():
        task = asyncio.create_task(rig.receiver.receive(inbound(m)))
        await asyncio.wait_for(rig.fake.blocked.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        rig.fake.release()
        return await asyncio.wait_for(rig.receiver.receive(inbound(m)), 5)

    retry = run(body())
    assert retry.state is State.UNKNOWN
    assert retry.evidence == {"duplicate": True}
    assert rig.fake.attempts == 1 and rig.fake.writes == []
    assert rig.types_for(m.message_id) == [R.RECEIVED, R.DISPATCH]
