"""One chain for every ingress: crosstalk's own notices and a session's native replies run `receive` like any
message (journaled, injected, outcome journaled), A2A tasks are journaled by the chain and dispatched later, and
listeners and stats see each message exactly once, with its final outcome."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.kinds import Kind
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.core.tasks import TaskState
from crosstalk.journal import records as R
from crosstalk.policy import Role
from crosstalk.receiver import NOTICE_TRANSPORT, Inbound
from crosstalk.tasks.service import TaskService
from tests.support.receiver import AGENT_ID, ALICE, CAROL, Rig, inbound, msg, run, wait_for
from tests.support.tasks import run_with_service

OWN_SESSION = Sender(SenderClass.VERIFIED, AGENT_ID, "bob", "uds")  # SO_PEERCRED matched our own descriptor


@pytest.fixture
def make_rig(root: Path) -> Iterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def factory(**kw: Any) -> Rig:
        rigs.append(Rig(root, **kw))
        return rigs[-1]

    yield factory
    for rig in rigs:
        rig.close()


def heard(rig: Rig) -> list[tuple[str, str, str, str | None]]:
    """Start recording what the listeners see: (message_id, transport, state, reason)."""
    seen: list[tuple[str, str, str, str | None]] = []
    rig.receiver.add_listener(lambda ib, out: seen.append((out.message_id, ib.transport, out.state.value, out.reason)))
    return seen


def test_a_notice_runs_the_whole_chain_even_for_a_worker(make_rig):
    rig = make_rig(role=Role.WORKER, owner="0123456789abcdef")  # a worker accepts its parent only...
    seen = heard(rig)
    out = run(rig.receiver.notify("you were claimed"))
    assert out.state is State.ACCEPTED  # ...but crosstalk's own word to its session is not a sender's message
    [write] = rig.fake.writes
    assert (write["text"], write["from"], write["kind"]) == ("you were claimed", "crosstalk", "inform")
    assert rig.types_for(out.message_id) == [R.RECEIVED, R.DISPATCH, R.OUTCOME]
    [received] = rig.records_for(out.message_id, R.RECEIVED)
    assert received["transport"] == NOTICE_TRANSPORT and received["native"] is True
    assert seen == [(out.message_id, NOTICE_TRANSPORT, "accepted", None)]


def test_only_our_own_inform_on_the_notice_transport_is_a_notice(make_rig):
    rig = make_rig(role=Role.WORKER, owner="0123456789abcdef")
    # Another agent cannot pass as a notice: the ACL judges it (a worker hears its parent only).
    other = Inbound(
        msg("hi"), Sender(SenderClass.VERIFIED, CAROL.agent_id, "crosstalk", NOTICE_TRANSPORT), NOTICE_TRANSPORT
    )
    assert run(rig.receiver.receive(other)).reason == "acl:agents"
    me = Sender(SenderClass.VERIFIED, AGENT_ID, "crosstalk", NOTICE_TRANSPORT)
    ask = Inbound(msg("do it", kind=Kind.COMMAND), me, NOTICE_TRANSPORT, native=True)
    assert run(rig.receiver.receive(ask)).reason == "kind:notice_inform_only"
    assert rig.fake.writes == []


def test_a_native_reply_from_our_own_session_is_bounced_inside_the_chain(make_rig):
    rig = make_rig()
    rig.receiver.open_messages = lambda: [{"message_id": "m-1", "from": "alice", "kind": "ask"}]
    seen = heard(rig)
    native = Inbound(msg("sure, done"), OWN_SESSION, "uds", native=True)
    out = run(rig.receiver.receive(native))
    assert (out.state, out.reason) == (State.BOUNCED, "native_reply_bounced")
    notice_id = out.evidence["notice"]
    assert out.evidence["notice_state"] == "accepted"
    [write] = rig.fake.writes  # the notice, never the native text
    assert (
        write["message_id"] == notice_id
        and "'sure, done'" in write["text"]
        and "- m-1 from alice (ask)" in write["text"]
    )
    assert rig.types_for(native.message.message_id) == [R.RECEIVED, R.OUTCOME]
    assert rig.types_for(notice_id) == [R.RECEIVED, R.DISPATCH, R.OUTCOME]
    # The notice is heard first (it settles inside the bounce), then the bounce; the notice is never bounced.
    assert [(s[1], s[2]) for s in seen] == [(NOTICE_TRANSPORT, "accepted"), ("uds", "bounced")]


def test_listeners_and_stats_see_every_ingress_once_with_its_final_outcome(root: Path):
    async def body(rig: Rig, svc: TaskService) -> None:
        seen = heard(rig)
        uds = await rig.receiver.receive(inbound(msg("over uds")))
        task = await svc.send(CAROL, msg("over a2a"), task_id=None, return_immediately=False)
        refused = await svc.send(CAROL, msg("a command", kind=Kind.COMMAND), task_id=None, return_immediately=False)
        assert task.state is TaskState.COMPLETED and refused.state is TaskState.FAILED
        first_a2a = task.history[0].message_id
        assert seen == [
            (uds.message_id, "uds", "accepted", None),
            (first_a2a, "a2a", "accepted", None),
            (refused.history[0].message_id, "a2a", "rejected", "kind:command_needs_parent"),
        ]
        again = await svc.send(CAROL, msg("over a2a", mid=first_a2a), task_id=None, return_immediately=False)
        assert again.task_id == task.task_id and len(seen) == 3  # a duplicate settles nothing new
        stats = rig.receiver.stats
        assert (stats.received, stats.duplicates, stats.injected, stats.rejected) == (4, 1, 2, 1)
        assert stats.by_state == {"accepted": 2, "rejected": 1}

    run_with_service(root, body)


def test_an_a2a_ping_is_answered_by_the_chain_and_never_reaches_the_session(root: Path):
    async def body(rig: Rig, svc: TaskService) -> None:
        view = await svc.send(ALICE, msg("are you there?", kind=Kind.PING), task_id=None, return_immediately=False)
        assert (view.state, view.reason, view.delivery) == (TaskState.COMPLETED, "pong", "accepted")
        assert rig.fake.writes == [] and rig.fake.attempts == 0
        assert (await svc.get(ALICE.agent_id, view.task_id)).state is TaskState.COMPLETED  # kept: journaled

    run_with_service(root, body)


def test_a_task_canceled_before_dispatch_is_settled_once_as_rejected(root: Path):
    async def body(rig: Rig, svc: TaskService) -> None:
        seen = heard(rig)
        first = await svc.send(CAROL, msg("holds the worker"), task_id=None, return_immediately=True)
        await wait_for(rig.fake.blocked)
        queued = await svc.send(CAROL, msg("never sent"), task_id=None, return_immediately=True)
        canceled = await svc.cancel(CAROL.agent_id, queued.task_id)
        assert canceled.state is TaskState.CANCELED
        mid = queued.history[0].message_id
        assert seen == [(mid, "a2a", "rejected", "canceled")]
        rig.fake.release()
        await wait_for(lambda: svc.table.tasks[first.task_id].view.terminal)
        assert [s[0] for s in seen] == [mid, first.history[0].message_id]  # the canceled one is never dispatched
        assert [w["text"] for w in rig.fake.writes] == ["holds the worker"]

    run_with_service(root, body, default="block")
