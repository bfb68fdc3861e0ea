"""Restart and reconcile through AgentHost.start: a journal left by a crash is replayed,
every unsettled message is settled without injection, a torn tail is dropped, and a sender's retry of a
pre-restart message_id over the socket returns the prior state with zero injections."""

from __future__ import annotations

import json
import time

import pytest

from crosstalk.core.ids import new_message_id
from crosstalk.core.message import new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.ingress.uds_client import deliver
from crosstalk.journal import records as R
from crosstalk.journal.replay import JournalState
from crosstalk.policy import Role
from crosstalk.registry.paths import StatePaths
from tests.support.uds import HOST_SESSION, WAIT_S, host_agent_id, run_peer

CI = Sender.unverified("@ci:build")
ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "uds")
OWNER = "0123456789abcdef"


def _bind(session_ref: str = HOST_SESSION) -> dict:
    return R.binding("inst-before-crash", session_ref, None)


def _received(text: str, sender: Sender = CI, *, session_ref: str = HOST_SESSION, mid: str | None = None):
    m = new_message("bob", text, from_=sender.name, message_id=mid)
    rec = R.received(m, sender, dedupe_key=sender.dedupe_key, transport="uds", bind=_bind(session_ref))
    return m, rec


def _write_journal(home, records, *, torn: bytes = b"") -> None:
    paths = StatePaths(home).ensure()
    path = paths.journal_file(host_agent_id())
    with open(path, "wb") as f:
        for rec in records:
            f.write(json.dumps(rec).encode() + b"\n")
        f.write(torn)


def _outcomes(host, mid):
    return host.records_for(mid, R.OUTCOME)


def test_claimed_without_outcome_is_unknown_after_start_and_never_injected(start_host, xt_home):
    m, rec = _received("was being injected")
    _write_journal(xt_home, [rec, R.dispatch(m.message_id, _bind())])
    host = start_host()
    assert host.host.replay_report["reconciled"] == 1
    entry = host.host.state.messages[m.message_id]
    assert (entry.state, entry.reason) == (State.UNKNOWN, "crashed_during_dispatch")
    (out,) = _outcomes(host, m.message_id)
    assert out["state"] == "unknown" and out["reconciled"] is True
    assert out["binding"]["instance_id"] == host.host.registration.instance_id
    assert host.fake.attempts == 0
    # The sender retries the same message_id over the socket: the prior state, zero injections.
    retry = run_peer(
        host.sock,
        deliver={"to": "bob", "text": "was being injected", "from": "@ci:build", "message_id": m.message_id},
        token=host.token,
    )
    assert retry["outcome"]["state"] == "unknown"
    assert retry["outcome"]["evidence"] == {"duplicate": True}
    assert host.fake.attempts == 0
    assert len(_outcomes(host, m.message_id)) == 1


def test_unclaimed_external_message_to_a_primary_is_recovered(start_host, xt_home):
    m, rec = _received("journaled, never claimed")
    _write_journal(xt_home, [rec])
    host = start_host()
    entry = host.host.state.messages[m.message_id]
    assert (entry.state, entry.reason) == (State.RECOVERED, "journaled_before_crash")
    assert entry.unresolved
    (out,) = _outcomes(host, m.message_id)
    assert out["state"] == "recovered" and out["reconciled"] is True
    assert host.fake.attempts == 0


def test_unclaimed_message_failing_policy_now_is_rejected(start_host, xt_home):
    m, rec = _received("fine for a primary, not for a worker")
    _write_journal(xt_home, [rec])
    host = start_host(role=Role.WORKER, owner=OWNER)
    entry = host.host.state.messages[m.message_id]
    assert (entry.state, entry.reason) == (State.REJECTED, "acl:external")
    assert not entry.unresolved  # stays out of the mailbox
    (out,) = _outcomes(host, m.message_id)
    assert out["state"] == "rejected" and out["reconciled"] is True
    assert host.fake.attempts == 0


@pytest.mark.parametrize("claimed", [False, True])
def test_records_bound_to_another_session_are_unreachable(start_host, xt_home, claimed):
    m, rec = _received("for the old conversation", session_ref="sess-previous")
    recs = [rec] + ([R.dispatch(m.message_id, _bind("sess-previous"))] if claimed else [])
    _write_journal(xt_home, recs)
    host = start_host()
    entry = host.host.state.messages[m.message_id]
    assert (entry.state, entry.reason) == (State.UNREACHABLE, "bound_to_another_conversation")
    assert host.fake.attempts == 0


def test_all_four_cases_in_one_journal(start_host, xt_home):
    a, ra = _received("a: dispatching")
    b, rb = _received("b: unclaimed")
    d, rd = _received("d: other session", session_ref="sess-previous")
    done, rdone = _received("settled before the crash", ALICE)
    _write_journal(
        xt_home,
        [
            rdone,
            R.dispatch(done.message_id, _bind()),
            R.outcome(done.message_id, State.QUEUED, None, _bind()),
            ra,
            R.dispatch(a.message_id, _bind()),
            rb,
            rd,
        ],
    )
    host = start_host()
    states = {mid: e.state for mid, e in host.host.state.messages.items()}
    assert states == {
        done.message_id: State.QUEUED,
        a.message_id: State.UNKNOWN,
        b.message_id: State.RECOVERED,
        d.message_id: State.UNREACHABLE,
    }
    assert host.host.replay_report["reconciled"] == 3
    assert _outcomes(host, done.message_id)[0].get("reconciled") is None
    assert host.fake.attempts == 0


def test_torn_trailing_line_replays_without_it(start_host, xt_home):
    good, rgood = _received("complete record")
    torn, rtorn = _received("torn record")
    tail = json.dumps(rtorn).encode()[: len(json.dumps(rtorn)) // 2]
    _write_journal(
        xt_home,
        [rgood, R.dispatch(good.message_id, _bind()), R.outcome(good.message_id, State.ACCEPTED, None, _bind())],
        torn=tail,
    )
    host = start_host()
    assert host.host.replay_report["torn_tail_bytes"] == len(tail)
    assert host.host.replay_report["bad_lines"] == 0
    assert torn.message_id not in host.host.state.messages
    assert host.host.state.messages[good.message_id].state is State.ACCEPTED
    assert host.journal_path.read_bytes().endswith(b"\n")
    # The torn message was never acknowledged, so its retry is a first delivery.
    out = run_peer(
        host.sock,
        deliver={"to": "bob", "text": "torn record", "from": "@ci:build", "message_id": torn.message_id},
        token=host.token,
    )
    assert out["outcome"]["state"] == "accepted"
    assert "evidence" not in out["outcome"] or not out["outcome"]["evidence"].get("duplicate")
    assert [w["message_id"] for w in host.fake.writes] == [torn.message_id]
    assert JournalState.replay(host.records()).messages[torn.message_id].state is State.ACCEPTED


def test_retry_after_a_real_restart_returns_prior_state_with_zero_injections(start_host, xt_home):
    first = start_host(script=["queue"])
    sock, agent_id = first.sock, first.agent_id
    mid = new_message_id()
    ask = {"to": "bob", "text": "deliver once", "from": "@ci:build", "message_id": mid}
    before = run_peer(first.sock, deliver=ask, token=first.token)
    assert before["outcome"]["state"] == "queued"
    assert len(first.fake.writes) == 1
    first.close()

    second = start_host()  # a new process would find the same journal, socket path and agent id
    assert (second.sock, second.agent_id) == (sock, agent_id)
    assert second.token != first.token  # a fresh key per start
    assert second.host.replay_report["reconciled"] == 0
    after = run_peer(second.sock, deliver=ask, token=second.token)
    assert after["outcome"]["state"] == "queued"
    assert after["outcome"]["evidence"] == {"duplicate": True}
    assert second.fake.attempts == 0


def test_restart_as_a_different_conversation_does_not_inherit_delivery(start_host, xt_home):
    """A retry to an agent restarted under another session_ref is a different agent (another agent_id, journal
    and socket): nothing of the old conversation is replayed into the new one."""
    first = start_host()
    msg = new_message("bob", "old conversation", from_="@ci:test")
    assert deliver(first.sock, first.token, msg, timeout=WAIT_S).state is State.ACCEPTED
    first.close()
    other = start_host(session_ref="sess-bob-2")
    assert other.agent_id != first.agent_id
    assert other.host.state.messages == {}
    assert other.fake.attempts == 0


def test_old_unresolved_records_survive_retention(start_host, xt_home):
    """Retention drops settled records older than 24 h but keeps unresolved ones (and reconciles them)."""
    old_done, r1 = _received("old and settled")
    old_open, r2 = _received("old and dispatching")
    stale = time.time() - 3 * 24 * 3600
    recs = [
        r1,
        R.dispatch(old_done.message_id, _bind()),
        R.outcome(old_done.message_id, State.ACCEPTED, None, _bind()),
        r2,
        R.dispatch(old_open.message_id, _bind()),
    ]
    for rec in recs:
        rec["ts"] = stale
    _write_journal(xt_home, recs)
    host = start_host()
    assert old_done.message_id not in host.host.state.messages
    assert host.host.state.messages[old_open.message_id].state is State.UNKNOWN
    assert host.host.replay_report["dropped_by_retention"] == 3


def test_close_during_injection_then_restart_reconciles_unknown(start_host, xt_home):
    """Stopped while a message is inside the harness write: the claim is durable, the outcome is not; the next
    start settles it as unknown and never injects it again."""
    import threading

    first = start_host(default="block")
    mid = new_message_id()
    result: dict = {}

    def send():
        result["out"] = run_peer(
            first.sock,
            deliver={"to": "bob", "text": "in flight", "from": "@ci:build", "message_id": mid},
            token=first.token,
        )

    t = threading.Thread(target=send)
    t.start()
    deadline = time.monotonic() + WAIT_S
    while not first.fake.attempts and time.monotonic() < deadline:
        time.sleep(0.01)
    assert first.fake.attempts == 1
    first.close()
    t.join(WAIT_S + 20)
    assert not t.is_alive()
    # The sender is told unknown before its connection closes: the message may have reached the session.
    assert result["out"]["error"] is None and result["out"]["outcome"]["state"] == "unknown", result["out"]
    second = start_host()
    entry = second.host.state.messages[mid]
    assert (entry.state, entry.reason) == (State.UNKNOWN, "crashed_during_dispatch")
    retry = run_peer(
        second.sock,
        deliver={"to": "bob", "text": "in flight", "from": "@ci:build", "message_id": mid},
        token=second.token,
    )
    assert retry["outcome"]["state"] == "unknown"
    assert second.fake.attempts == 0
