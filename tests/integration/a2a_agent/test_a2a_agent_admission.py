"""Admission limits and the A2A edge limits, against a real stalled agent.

Bob runs with small limits (2 pending tasks, 1 open ask, 1 concurrent default-wait SendMessage) and a fake harness
that blocks until released. Each limit exceeded answers a deterministic JSON-RPC error before acceptance: no task,
no received record, nothing injected; every message accepted before it is still in the journal and completes once
bob is released. The 256 KiB body cap, the 64 KiB text limit and the hop guard refuse the same way.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError, InvalidRequestError

from crosstalk.core.errors import TaskError
from crosstalk.core.ids import hop_entry, new_message_id
from crosstalk.core.message import Message, new_message
from crosstalk.core.tasks import TaskState
from crosstalk.ingress.a2a.client import A2AClient
from crosstalk.policy import Limits
from tests.support.a2a_agents import (
    WAIT_S,
    agents,
    alice_to_bob,
    ct_meta,
    error_of,
    of_type,
    received_ids,
    result_of,
    rpc,
    run,
    sdk,
    send_request,
    start_agent,
    text_message,
    until,
)

LIMITS = Limits(max_pending_tasks=2, max_open_asks=1, max_default_waits=1)
STALLED = {"default": "block", "limits": LIMITS}
ASK = {"crosstalk": {"kind": "ask"}}
BODY_LIMIT = 256 * 1024
TEXT_LIMIT = 64 * 1024


async def accepted_everything(bob, ids: list[str]) -> None:
    """Each id is journaled as received and, after release, settled with one accepted outcome and one write."""
    await until(lambda: all(mid in bob.write_ids() for mid in ids), "every accepted message written")
    recs = await bob.records()
    for mid in ids:
        assert mid in received_ids(recs)
        assert [o["state"] for o in of_type(recs, "outcome", mid)] == ["accepted"], mid
        assert bob.write_ids().count(mid) == 1


def test_25_pending_tasks_limit_rejects_before_acceptance_and_evicts_nothing():
    async def main(root):
        async with alice_to_bob(root, **STALLED) as (alice, bob, client):
            ids = [new_message_id(), new_message_id()]
            tasks = []
            for mid in ids:
                tasks.append(await client.send_task(send_request("work", message_id=mid, returnImmediately=True)))
                await asyncio.wait_for(bob.fake.blocked.wait(), WAIT_S)
            over = new_message_id()
            for _ in range(3):  # deterministic: the same answer every time, and no state left behind
                with pytest.raises(InvalidRequestError) as info:
                    await client.send(send_request("one too many", message_id=over, returnImmediately=True))
                assert "admission:pending_tasks" in info.value.message
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                params = {
                    "message": text_message("raw", new_message_id()),
                    "configuration": {"returnImmediately": True},
                }
                err = error_of(await rpc(http, bob.url, "SendMessage", params, token=alice.token))
                assert err["code"] == -32600 and "admission:pending_tasks" in err["message"]
            listed = await client.list()
            assert {t.id for t in listed.tasks} == {t.id for t in tasks}  # no task was created
            recs = await bob.records()
            assert over not in received_ids(recs)
            assert {r["reason"] for r in of_type(recs, "rejected", over)} == {"admission:pending_tasks"}
            assert all(mid in received_ids(recs) for mid in ids)  # nothing accepted was evicted

            bob.fake.release()
            for t in tasks:
                done = await client.wait_state(t.id, pb.TASK_STATE_COMPLETED)
                assert ct_meta(done)["completion"] == "delivered"
            await accepted_everything(bob, ids)
            # The refused message left nothing behind: the same id is accepted once there is room.
            retry = await client.send_task(send_request("one too many", message_id=over))
            assert retry.status.state == pb.TASK_STATE_COMPLETED
            assert bob.write_ids().count(over) == 1

    run(main)


def test_25_default_wait_limit_rejects_a_second_concurrent_wait():
    async def main(root):
        async with agents(root, "alice", "bob", "carol", bob=STALLED) as ag:
            alice, bob, carol = ag["alice"], ag["bob"], ag["carol"]
            async with sdk(bob.url, alice.token) as a, sdk(bob.url, carol.token) as c:
                first = new_message_id()
                waiting = asyncio.create_task(a.send_task(send_request("i will wait", message_id=first)))
                try:
                    await asyncio.wait_for(bob.fake.blocked.wait(), WAIT_S)
                    assert not waiting.done()
                    # Another default wait (from anyone) is over the limit of 1.
                    for client in (a, c):
                        with pytest.raises(InvalidRequestError) as info:
                            await client.send(send_request("me too", message_id=new_message_id()))
                        assert "admission:default_waits" in info.value.message
                    # returnImmediately is not a wait: still admitted (the second pending task).
                    quick_id = new_message_id()
                    quick = await c.send_task(send_request("no wait", message_id=quick_id, returnImmediately=True))
                    assert quick.status.state == pb.TASK_STATE_SUBMITTED
                    assert (await a.list()).total_size == 1 and (await c.list()).total_size == 1
                    bob.fake.release()
                    done = await asyncio.wait_for(waiting, WAIT_S)
                finally:
                    bob.fake.release()
                    if not waiting.done():
                        waiting.cancel()
                assert done.status.state == pb.TASK_STATE_COMPLETED
                await c.wait_state(quick.id, pb.TASK_STATE_COMPLETED)
                await accepted_everything(bob, [first, quick_id])
                # With the wait over, a default wait is admitted again.
                again = await a.send_task(send_request("now i may wait", message_id=new_message_id()))
                assert again.status.state == pb.TASK_STATE_COMPLETED

    run(main)


def test_25_open_asks_limit_rejects_a_second_unanswered_ask():
    async def main(root):
        async with alice_to_bob(root, limits=LIMITS) as (_alice, bob, client):
            first = new_message_id()
            ask = await client.send_task(send_request("q1", message_id=first, metadata=ASK, returnImmediately=True))
            await client.wait_delivered(ask.id)  # delivered, the reply still owed
            over = new_message_id()
            with pytest.raises(InvalidRequestError) as info:
                await client.send(send_request("q2", message_id=over, metadata=ASK, returnImmediately=True))
            assert "admission:open_asks" in info.value.message
            # An inform is not an ask: admitted.
            informed = await client.send_task(send_request("fyi", message_id=new_message_id()))
            assert informed.status.state == pb.TASK_STATE_COMPLETED
            assert over not in received_ids(await bob.records())
            assert (await client.list()).total_size == 2
            # The open ask is untouched by the refusal and still answerable; then there is room again.
            await bob.tasks.reply(first, "a1")
            answered = await client.wait_state(ask.id, pb.TASK_STATE_COMPLETED)
            assert [p.text for p in answered.status.message.parts] == ["a1"]
            second = await client.send_task(send_request("q2", message_id=over, metadata=ASK, returnImmediately=True))
            await client.wait_delivered(second.id)
            assert bob.write_ids().count(over) == 1

    run(main)


def test_25_open_asks_limit_holds_while_the_receiver_is_stalled():
    """Asks accepted while bob is stalled open reply obligations once delivered: the limit counts them already,
    so the second ask is refused before acceptance rather than delivered over the limit."""

    async def main(root):
        async with alice_to_bob(root, **STALLED) as (_alice, bob, client):
            first = new_message_id()
            ask = await client.send_task(send_request("q1", message_id=first, metadata=ASK, returnImmediately=True))
            await asyncio.wait_for(bob.fake.blocked.wait(), WAIT_S)
            with pytest.raises(InvalidRequestError) as info:
                await client.send(send_request("q2", message_id=new_message_id(), metadata=ASK, returnImmediately=True))
            assert "admission:open_asks" in info.value.message
            bob.fake.release()
            await client.wait_delivered(ask.id)
            assert bob.write_ids() == [first]
            assert bob.host.state.open_asks() == 1

    run(main)


def test_25_body_over_256_kib_is_a_jsonrpc_error_not_a_bare_413():
    async def main(root):
        async with agents(root, "alice", "bob") as ag:
            alice, bob = ag["alice"], ag["bob"]
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                mid = new_message_id()
                params = {"message": text_message("x" * (BODY_LIMIT + 1), mid)}
                body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params}).encode()
                assert len(body) > BODY_LIMIT
                headers = {
                    "Authorization": f"Bearer {alice.token}",
                    "A2A-Version": "1.0",
                    "Content-Type": "application/json",
                }
                response = await http.post(bob.url, content=body, headers=headers)
                assert response.status_code == 200, response.status_code  # a JSON-RPC answer, not a bare 413
                err = error_of(response)
                assert err["code"] == -32600 and str(BODY_LIMIT) in err["message"]
                # The agent is fine afterwards, and nothing from the big body arrived.
                ok = await rpc(
                    http,
                    bob.url,
                    "SendMessage",
                    {"message": text_message("small", new_message_id())},
                    token=alice.token,
                )
                assert result_of(ok)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            assert [w["text"] for w in bob.writes()] == ["small"]
            assert mid not in received_ids(await bob.records())

    run(main)


def test_25_text_over_64_kib_is_rejected_and_64_kib_is_accepted():
    async def main(root):
        async with alice_to_bob(root) as (_alice, bob, client):
            over = new_message_id()
            with pytest.raises(InvalidParamsError) as info:
                await client.send(send_request("y" * (TEXT_LIMIT + 1), message_id=over))
            assert "text is 65537 bytes, over the 65536-byte limit" in info.value.message
            # Multi-byte text counts in UTF-8 bytes: 16385 four-byte characters are 65540 bytes.
            with pytest.raises(InvalidParamsError) as info:
                await client.send(send_request("\U0001f600" * (TEXT_LIMIT // 4 + 1), message_id=new_message_id()))
            assert "text is 65540 bytes, over the 65536-byte limit" in info.value.message
            exact = await client.send_task(send_request("z" * TEXT_LIMIT, message_id=new_message_id()))
            assert exact.status.state == pb.TASK_STATE_COMPLETED
            assert (await client.list()).total_size == 1
            assert [len(w["text"]) for w in bob.writes()] == [TEXT_LIMIT]
            assert over not in received_ids(await bob.records())

    run(main)


def test_25_a_smaller_text_limit_is_enforced_by_admission():
    async def main(root):
        async with agents(root, "alice", "bob", bob={"limits": Limits(max_text_bytes=100)}) as ag:
            alice, bob = ag["alice"], ag["bob"]
            async with A2AClient(bob.url, alice.token, timeout=WAIT_S) as peer:
                with pytest.raises(TaskError) as info:
                    await peer.send(new_message("bob", "w" * 101))
                assert info.value.code == TaskError.INVALID and "admission:text_too_large" in info.value.message
                view = await peer.send(new_message("bob", "w" * 100))
                assert view.state is TaskState.COMPLETED
            assert [len(w["text"]) for w in bob.writes()] == [100]

    run(main)


def test_25_hop_chain_with_the_receivers_entry_a_repeat_or_33_entries_is_rejected():
    async def main(root):
        async with agents(root, "alice", "bob") as ag:
            alice, bob = ag["alice"], ag["bob"]
            others = [hop_entry(f"{i:016x}") for i in range(40)]
            mine = hop_entry(bob.agent_id)
            assert mine not in others
            cases = {
                "hop:loop": [others[0], mine],
                "hop:too_long": others[:33],
            }
            async with A2AClient(bob.url, alice.token, timeout=WAIT_S) as peer:

                def chained(chain: list[str], text: str) -> Message:
                    return new_message("bob", text).with_(hop_chain=tuple(chain))

                refused = []
                for reason, chain in cases.items():
                    msg = chained(chain, reason)
                    with pytest.raises(TaskError) as info:
                        await peer.send(msg)
                    assert info.value.code == TaskError.INVALID and reason in info.value.message, info.value.message
                    refused.append(msg.message_id)
                repeat = chained([others[1], others[2], others[1]], "repeat")
                with pytest.raises(TaskError) as info:
                    await peer.send(repeat)
                assert "hop:loop" in info.value.message
                refused.append(repeat.message_id)
                # A chain of exactly 32 others passes the guard.
                ok = await peer.send(chained(others[:32], "32 hops"))
                assert ok.state is TaskState.COMPLETED
            # The same refusal through the SDK client with the chain in metadata.crosstalk.
            async with sdk(bob.url, alice.token) as client:
                meta = {"crosstalk": {"hop_chain": [mine]}}
                with pytest.raises(InvalidRequestError) as sdk_info:
                    await client.send(send_request("sdk loop", message_id=new_message_id(), metadata=meta))
                assert "hop:loop" in sdk_info.value.message
            assert [w["text"] for w in bob.writes()] == ["32 hops"]
            recs = await bob.records()
            assert not set(refused) & set(received_ids(recs))

    run(main)


def test_25_accepted_asks_are_resumed_after_a_restart_even_over_a_smaller_limit():
    """Admission is checked once, before acceptance: asks journaled before a restart are resumed and delivered
    even when the restarted agent's limit is now lower, and only new asks are refused."""

    async def main(root):
        stalled = {"default": "block", "limits": Limits(max_open_asks=3)}
        async with agents(root, "alice", "bob", bob=stalled) as ag:
            alice, bob = ag["alice"], ag["bob"]
            ids = [new_message_id() for _ in range(3)]
            async with sdk(bob.url, alice.token) as client:
                tasks = []
                for i, mid in enumerate(ids):
                    req = send_request(f"q{i}", message_id=mid, metadata=ASK, returnImmediately=True)
                    tasks.append(await client.send_task(req))
                    if i == 0:
                        await asyncio.wait_for(bob.fake.blocked.wait(), WAIT_S)
            await bob.close()
            bob2 = await start_agent(root, "bob", limits=Limits(max_open_asks=1))
            try:
                async with sdk(bob2.url, alice.token) as client:
                    for task in tasks[1:]:
                        resumed = await client.wait_delivered(task.id)
                        assert resumed.status.state == pb.TASK_STATE_WORKING
                        assert ct_meta(resumed)["delivery"] == "accepted"
                    assert ct_meta(await client.get(tasks[0].id))["delivery"] == "unknown"
                    with pytest.raises(InvalidRequestError) as info:
                        await client.send(send_request("q3", message_id=new_message_id(), metadata=ASK))
                    assert "admission:open_asks" in info.value.message
                assert sorted(bob2.write_ids()) == sorted(ids[1:])
                await bob2.tasks.reply(ids[1], "r1")
                await bob2.tasks.reply(ids[2], "r2")
                assert bob2.host.state.open_asks() == 0
            finally:
                await bob2.close()

    run(main)
