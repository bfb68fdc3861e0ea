"""Nothing acknowledged is lost or injected twice across a crash, over A2A, and a receiver restart between
acceptance and delivery.

The receiver (bob) is a real AgentHost; "restart" closes it and starts a new AgentHost on the same state root with
the same session, so it replays the same journal (a new port, so a new URL). Bob's fake writes every injection to
one inbox file that outlives both hosts: the file is the count of injections across the restart.
"""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotCancelableError

from crosstalk.core.ids import new_message_id
from crosstalk.core.message import new_message
from crosstalk.core.tasks import TaskState
from crosstalk.ingress.a2a.client import A2AClient
from tests.support.a2a_agents import (
    WAIT_S,
    Agent,
    agents,
    ct_meta,
    of_type,
    received_ids,
    run,
    sdk,
    send_request,
    start_agent,
    task_records,
    until,
)

ASK = {"crosstalk": {"kind": "ask"}}


async def restart(old: Agent, **options) -> Agent:
    """Close the agent and start it again on the same root and session (options: the new fake's script...)."""
    await old.close()
    return await start_agent(old.root, old.name, session_ref=old.session_ref, **options)


def test_20_retry_after_restart_returns_the_prior_task_with_zero_injections():
    async def main(root):
        async with agents(root, "alice", "bob") as ag:
            alice, bob = ag["alice"], ag["bob"]
            done_id, ask_id = new_message_id(), new_message_id()
            async with sdk(bob.url, alice.token) as client:
                done = await client.send_task(send_request("before the restart", message_id=done_id))
                assert done.status.state == pb.TASK_STATE_COMPLETED
                ask = await client.send_task(
                    send_request("still open?", message_id=ask_id, metadata=ASK, returnImmediately=True)
                )
                await client.wait_delivered(ask.id)
            assert bob.inbox_ids() == [done_id, ask_id]

            bob2 = await restart(bob)
            try:
                assert bob2.url != "" and bob2.writes() == []
                async with sdk(bob2.url, alice.token) as client:
                    # The same message ids again: the prior tasks and states, nothing injected.
                    again = await client.send_task(send_request("before the restart", message_id=done_id))
                    assert (again.id, again.status.state) == (done.id, pb.TASK_STATE_COMPLETED)
                    assert ct_meta(again)["completion"] == "delivered"
                    again_ask = await client.send_task(
                        send_request("still open?", message_id=ask_id, metadata=ASK, returnImmediately=True)
                    )
                    assert (again_ask.id, again_ask.status.state) == (ask.id, pb.TASK_STATE_WORKING)
                    # The rebuilt tasks are alice's, listed and readable.
                    listed = await client.list()
                    assert {t.id for t in listed.tasks} == {done.id, ask.id}
                # crosstalk's own client retrying the same message id is deduped the same way.
                async with A2AClient(bob2.url, alice.token, timeout=WAIT_S) as peer:
                    view = await peer.send(new_message("bob", "before the restart", message_id=done_id))
                    assert (view.task_id, view.state) == (done.id, TaskState.COMPLETED)
                # The open ask survived the restart: the session can still answer it.
                await bob2.tasks.reply(ask_id, "yes, after the restart")
                async with sdk(bob2.url, alice.token) as client:
                    answered = await client.wait_state(ask.id, pb.TASK_STATE_COMPLETED)
                    assert [p.text for p in answered.status.message.parts] == ["yes, after the restart"]
                await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) write to show
                assert bob2.writes() == []
                assert bob2.inbox_ids() == [done_id, ask_id]  # zero injections across the restart
                recs = await bob2.records()
                assert sorted(received_ids(recs)) == sorted([done_id, ask_id])  # no second received record
            finally:
                await bob2.close()

    run(main)


def test_20_restart_while_blocked_resumes_the_unclaimed_task_once_and_keeps_the_claimed_one_unknown():
    async def main(root):
        async with agents(root, "alice", "bob", bob={"script": ["block"]}) as ag:
            alice, bob = ag["alice"], ag["bob"]
            claimed_id, queued_id = new_message_id(), new_message_id()
            async with sdk(bob.url, alice.token) as client:
                claimed = await client.send_task(send_request("claimed", message_id=claimed_id, returnImmediately=True))
                await asyncio.wait_for(bob.fake.blocked.wait(), WAIT_S)  # claimed, held before the harness write
                queued = await client.send_task(send_request("queued", message_id=queued_id, returnImmediately=True))
                assert queued.status.state == pb.TASK_STATE_SUBMITTED
            recs = await bob.records()
            assert of_type(recs, "dispatch", claimed_id) and not of_type(recs, "dispatch", queued_id)

            # Stop the receiver while the first is blocked inside the harness (never written) and the second waits.
            bob2 = await restart(bob)
            try:
                async with sdk(bob2.url, alice.token) as client:
                    resumed = await client.wait_state(queued.id, pb.TASK_STATE_COMPLETED)
                    assert ct_meta(resumed)["completion"] == "delivered"
                    kept = await client.get(claimed.id)
                    # Claimed before the restart with no outcome: maybe delivered, so never re-injected and never
                    # completed; it stays working with delivery unknown.
                    assert kept.status.state == pb.TASK_STATE_WORKING
                    assert ct_meta(kept)["delivery"] == "unknown" and "completion" not in ct_meta(kept)
                    # Retrying either message id returns the task as it is; nothing is injected.
                    for mid, task in ((claimed_id, claimed), (queued_id, queued)):
                        again = await client.send_task(send_request("x", message_id=mid, returnImmediately=True))
                        assert again.id == task.id
                    with pytest.raises(TaskNotCancelableError):
                        await client.cancel(claimed.id)
                await until(lambda: bob2.write_ids(), "the resumed task written")
                assert bob2.write_ids() == [queued_id]  # the resumed one (once: one dispatch record, below)
                assert bob2.inbox_ids() == [queued_id]  # and nothing from before the restart reached the session
                recs = await bob2.records()
                assert [o["state"] for o in of_type(recs, "outcome", claimed_id)] == ["unknown"]
                assert [o["state"] for o in of_type(recs, "outcome", queued_id)] == ["accepted"]
                assert len(of_type(recs, "dispatch", queued_id)) == 1
                assert task_records(recs, claimed.id)[-1]["reason"] == "restarted_during_dispatch"
                # A second restart changes nothing: no task is resumed twice.
                bob3 = await restart(bob2)
                bob2 = bob3
                await asyncio.sleep(0.3)  # what is tested is an absence: time for a (wrong) write to show
                assert bob3.writes() == [] and bob3.inbox_ids() == [queued_id]
                async with sdk(bob3.url, alice.token) as client:
                    assert (await client.get(queued.id)).status.state == pb.TASK_STATE_COMPLETED
                    assert (await client.get(claimed.id)).status.state == pb.TASK_STATE_WORKING
            finally:
                await bob2.close()

    run(main)


def test_20_a_torn_journal_tail_is_dropped_on_replay():
    async def main(root):
        async with agents(root, "alice", "bob") as ag:
            alice, bob = ag["alice"], ag["bob"]
            mid = new_message_id()
            async with sdk(bob.url, alice.token) as client:
                done = await client.send_task(send_request("kept", message_id=mid))
            journal = bob.paths.journal_file(bob.agent_id)
            await bob.close()
            with open(journal, "ab") as f:
                f.write(b'{"type":"received","v":1,"message":{"message_id":"torn')  # a crash mid-append
            bob2 = await start_agent(root, "bob")
            try:
                assert bob2.host.replay_report["torn_tail_bytes"] > 0
                async with sdk(bob2.url, alice.token) as client:
                    got = await client.get(done.id)
                    assert got.status.state == pb.TASK_STATE_COMPLETED
                    fresh = await client.send_task(send_request("after", message_id=new_message_id()))
                    assert fresh.status.state == pb.TASK_STATE_COMPLETED
                assert len(bob2.writes()) == 1
            finally:
                await bob2.close()

    run(main)


@pytest.mark.parametrize("round_", range(3))
def test_restart_between_acceptance_and_delivery_ends_definite_and_injects_at_most_once(round_):
    """returnImmediately, the receiver stalled (fake block), stopped, restarted: each accepted task ends in a
    state its creator can act on, and no message reaches the session twice."""

    async def main(root):
        async with agents(root, "alice", "bob", bob={"script": ["block"]}) as ag:
            alice, bob = ag["alice"], ag["bob"]
            ids = [new_message_id() for _ in range(3)]
            async with A2AClient(bob.url, alice.token, timeout=WAIT_S) as peer:
                views = []
                for i, mid in enumerate(ids):
                    views.append(
                        await peer.send(new_message("bob", f"work {i}", message_id=mid), return_immediately=True)
                    )
                    if i == 0:
                        await asyncio.wait_for(bob.fake.blocked.wait(), WAIT_S)
                assert [v.state for v in views] == [TaskState.SUBMITTED] * 3
            bob2 = await restart(bob)
            try:
                async with A2AClient(bob2.url, alice.token, timeout=WAIT_S) as peer:
                    final = {}

                    async def settled() -> bool:
                        for v in views:
                            final[v.task_id] = await peer.get(v.task_id)
                        return all(f.delivery is not None for f in final.values())

                    loop = asyncio.get_running_loop()
                    deadline = loop.time() + WAIT_S
                    while not await settled():
                        assert loop.time() < deadline, final
                        await asyncio.sleep(0.02)
                first, *rest = (final[v.task_id] for v in views)
                # The one claimed before the restart: delivery unknown, working, never re-injected.
                assert (first.state, first.delivery, first.completion) == (TaskState.WORKING, "unknown", None)
                # The ones only journaled: resumed after the restart and delivered, once each.
                assert [(r.state, r.completion) for r in rest] == [(TaskState.COMPLETED, "delivered")] * 2
                await until(lambda: len(bob2.inbox_ids()) >= 2, "resumed writes")
                await asyncio.sleep(0.2)  # what is tested is an absence: time for a (wrong) second write to show
                inbox = bob2.inbox_ids()
                assert sorted(inbox) == sorted(ids[1:]) and len(set(inbox)) == len(inbox)
            finally:
                await bob2.close()

    run(main)
