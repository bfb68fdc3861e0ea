"""The cancel race, against a real agent over A2A: CancelTask in the dequeue-to-write window is
never both canceled and written. Either canceled with zero writes, or TaskNotCancelable with exactly one."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotCancelableError

from crosstalk.core.ids import new_message_id
from tests.support.a2a_agents import WAIT_S, agents, alice_to_bob, ct_meta, of_type, run, sdk, send_request, until

ROUNDS = 5


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_22_cancel_in_the_window_is_refused_and_exactly_one_write_follows(round_):
    """The fake blocks after the dequeue (the dispatch claim is durable) and before its write: a cancel there
    loses, and after release exactly one write happens. A task still queued behind it cancels with zero writes."""

    async def main(root):
        async with alice_to_bob(root, script=["block"]) as (_alice, bob, client):
            held_id, queued_id = new_message_id(), new_message_id()
            held = await client.send_task(send_request("held", message_id=held_id, returnImmediately=True))
            await asyncio.wait_for(bob.fake.blocked.wait(), WAIT_S)
            queued = await client.send_task(send_request("queued", message_id=queued_id, returnImmediately=True))
            # In the window: dequeued and claimed, not yet written. Asked twice: the answer does not change.
            for _ in range(2):
                with pytest.raises(TaskNotCancelableError):
                    await client.cancel(held.id)
            # Before the dequeue: canceled.
            canceled = await client.cancel(queued.id)
            assert canceled.status.state == pb.TASK_STATE_CANCELED
            assert bob.write_ids() == []  # nothing written while blocked
            bob.fake.release()
            done = await client.wait_state(held.id, pb.TASK_STATE_COMPLETED)
            assert ct_meta(done)["completion"] == "delivered"
            await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) write to show
            assert bob.write_ids() == [held_id]  # exactly one write, the held one
            assert bob.inbox_ids() == [held_id]
            assert (await client.get(queued.id)).status.state == pb.TASK_STATE_CANCELED
            recs = await bob.records()
            assert [r["state"] for r in of_type(recs, "outcome", queued_id)] == ["rejected"]
            assert not of_type(recs, "dispatch", queued_id)  # the canceled one was never claimed
            assert len(of_type(recs, "dispatch", held_id)) == 1

    run(main)


def test_22_cancel_racing_the_worker_is_never_both_canceled_and_written():
    """No blocking: a burst of tasks, then a burst of cancels racing the dispatch worker through the queue.
    Whichever side wins each race, the answer and the writes agree."""

    async def main(root):
        async with agents(root, "alice", "bob") as ag:
            alice, bob = ag["alice"], ag["bob"]
            seen = {"canceled": 0, "not_cancelable": 0}
            inject = bob.fake.inject

            async def slow_inject(request):  # a session that takes a few ms per write keeps the queue non-empty
                await asyncio.sleep(0.004)
                return await inject(request)

            bob.fake.inject = slow_inject
            async with sdk(bob.url, alice.token) as client:
                for burst in range(3):
                    ids = [new_message_id() for _ in range(12)]
                    tasks = await asyncio.gather(
                        *(
                            client.send_task(send_request(f"race {burst}.{i}", message_id=mid, returnImmediately=True))
                            for i, mid in enumerate(ids)
                        )
                    )
                    answers = await asyncio.gather(*(client.cancel(t.id) for t in tasks), return_exceptions=True)
                    for mid, task, answer in zip(ids, tasks, answers, strict=True):
                        if isinstance(answer, TaskNotCancelableError):
                            seen["not_cancelable"] += 1
                            await client.wait_state(task.id, pb.TASK_STATE_COMPLETED)
                            await until(lambda mid=mid: mid in bob.write_ids(), "the write")
                        else:
                            assert isinstance(answer, pb.Task), answer
                            seen["canceled"] += 1
                            assert answer.status.state == pb.TASK_STATE_CANCELED
                    await asyncio.sleep(0.1)  # give a (wrong) dispatch of a canceled task the chance to happen
                    for mid, answer in zip(ids, answers, strict=True):
                        expected = 1 if isinstance(answer, TaskNotCancelableError) else 0
                        assert bob.write_ids().count(mid) == expected, (mid, answer)
            # Both sides of the race were exercised: some cancels beat the worker, some came after its claim.
            assert seen["canceled"] > 0 and seen["not_cancelable"] > 0, seen
            assert len(set(bob.write_ids())) == len(bob.write_ids()) == seen["not_cancelable"]
            print("cancel race:", seen)

    run(main)
