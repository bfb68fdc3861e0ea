"""Continuation and authority between real agents over A2A.

Identity is each agent's own bearer token; bob is the receiver. A continuation (SendMessage with a taskId) is only
its creator's, and is policy-checked again; an ask carries inform's permissions and never command authority; a
command needs the receiver's parent (the owner that claimed it), so primary→primary is refused as a failed task.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidRequestError, TaskNotCancelableError, TaskNotFoundError

from crosstalk.core.ids import agent_id_for, new_message_id
from crosstalk.policy import Role
from tests.support.a2a_agents import (
    WAIT_S,
    agents,
    alice_to_bob,
    ct_meta,
    error_of,
    history_roles,
    of_type,
    received_ids,
    rpc,
    run,
    sdk,
    send_request,
    text_message,
)

ASK = {"crosstalk": {"kind": "ask"}}
COMMAND = {"crosstalk": {"kind": "command"}}


def test_23_another_agents_continuation_is_task_not_found_and_nothing_is_injected():
    async def main(root):
        async with agents(root, "alice", "bob", "carol") as ag:
            alice, bob, carol = ag["alice"], ag["bob"], ag["carol"]
            ask_id, intruder_id = new_message_id(), new_message_id()
            async with sdk(bob.url, alice.token) as a, sdk(bob.url, carol.token) as c:
                task = await a.send_task(
                    send_request("open ask", message_id=ask_id, metadata=ASK, returnImmediately=True)
                )
                await a.wait_delivered(task.id)
                for meta in (None, ASK, COMMAND):
                    with pytest.raises(TaskNotFoundError):
                        await c.send(send_request("let me in", message_id=intruder_id, task_id=task.id, metadata=meta))
                with pytest.raises(TaskNotFoundError):
                    await c.get(task.id)
                with pytest.raises(TaskNotFoundError):
                    await c.cancel(task.id)
                assert (await c.list()).total_size == 0
                await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) write to show
                assert bob.write_ids() == [ask_id]
                assert intruder_id not in received_ids(await bob.records())
                still = await a.get(task.id)
                assert still.status.state == pb.TASK_STATE_WORKING
                assert [m.message_id for m in still.history] == [ask_id]

    run(main)


def test_23_the_creators_continuation_is_policy_checked_again():
    async def main(root):
        async with agents(root, "alice", "bob") as ag:
            alice, bob = ag["alice"], ag["bob"]
            ask_id, cmd_id, more_id = new_message_id(), new_message_id(), new_message_id()
            async with sdk(bob.url, alice.token) as a:
                task = await a.send_task(
                    send_request("question", message_id=ask_id, metadata=ASK, returnImmediately=True)
                )
                await a.wait_delivered(task.id)
                # A command continuation from a non-parent: refused, not injected, the task unchanged.
                with pytest.raises(InvalidRequestError) as info:
                    await a.send(send_request("now do it", message_id=cmd_id, task_id=task.id, metadata=COMMAND))
                assert "kind:command_needs_parent" in info.value.message
                assert bob.write_ids() == [ask_id]
                assert (await a.get(task.id)).status.state == pb.TASK_STATE_WORKING
                # An inform continuation passes the same checks and is delivered into the task.
                cont = await a.send_task(send_request("some context", message_id=more_id, task_id=task.id))
                assert cont.status.state == pb.TASK_STATE_WORKING
                assert bob.write_ids() == [ask_id, more_id]
                assert [w["kind"] for w in bob.writes()] == ["ask", "inform"]
            # Over raw JSON-RPC the refusal is a JSON-RPC error naming the reason.
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                params = {"message": text_message("again", new_message_id(), taskId=task.id, metadata=COMMAND)}
                response = await rpc(http, bob.url, "SendMessage", params, token=alice.token)
                err = error_of(response)
                assert err["code"] == -32600 and "kind:command_needs_parent" in err["message"]
            recs = await bob.records()
            assert cmd_id not in received_ids(recs)
            assert [r["reason"] for r in of_type(recs, "rejected", cmd_id)] == ["kind:command_needs_parent"]

    run(main)


def test_23_command_from_a_primary_to_another_primary_is_a_failed_task():
    async def main(root):
        async with alice_to_bob(root) as (_alice, bob, a):
            waited = await a.send_task(send_request("rm -rf build", message_id=new_message_id(), metadata=COMMAND))
            assert waited.status.state == pb.TASK_STATE_FAILED
            meta = ct_meta(waited)
            assert (meta["reason"], meta["delivery"], meta["kind"]) == (
                "kind:command_needs_parent",
                "rejected",
                "command",
            )
            immediate = await a.send_task(
                send_request("deploy", message_id=new_message_id(), metadata=COMMAND, returnImmediately=True)
            )
            assert immediate.status.state == pb.TASK_STATE_FAILED
            # The failed tasks are the creator's to look up; they cannot be canceled.
            got = await a.get(waited.id)
            assert got.status.state == pb.TASK_STATE_FAILED
            assert history_roles(got) == [("ROLE_USER", "rm -rf build")]
            assert {t.id for t in (await a.list()).tasks} == {waited.id, immediate.id}
            with pytest.raises(TaskNotCancelableError):
                await a.cancel(waited.id)
            await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) write to show
            assert bob.writes() == []
            assert received_ids(await bob.records()) == []

    run(main)


def test_23_ask_from_a_non_owner_has_inform_permissions_only_and_the_owner_may_command():
    """Bob is a worker owned by carol that also accepts other agents: alice's ask is delivered and answered, but
    her command (new or as a continuation of her ask) is refused; carol's command is delivered."""

    async def main(root):
        carol_id = agent_id_for("fake", "sess-carol")
        options = {"role": Role.WORKER, "owner": carol_id, "accept_from": ("parent", "agents")}
        async with agents(root, "carol", "alice", "bob", bob=options) as ag:
            alice, bob, carol = ag["alice"], ag["bob"], ag["carol"]
            assert carol.agent_id == carol_id
            ask_id = new_message_id()
            async with sdk(bob.url, alice.token) as a, sdk(bob.url, carol.token) as c:
                ask = await a.send_task(
                    send_request("status?", message_id=ask_id, metadata=ASK, returnImmediately=True)
                )
                await a.wait_delivered(ask.id)
                assert bob.writes()[0]["kind"] == "ask" and bob.writes()[0]["from"] == "alice"
                # No command authority, neither in a new task nor riding on the ask's task.
                cmd = await a.send_task(send_request("stop now", message_id=new_message_id(), metadata=COMMAND))
                assert cmd.status.state == pb.TASK_STATE_FAILED
                assert ct_meta(cmd)["reason"] == "kind:command_needs_parent"
                with pytest.raises(InvalidRequestError):
                    await a.send(send_request("stop", message_id=new_message_id(), task_id=ask.id, metadata=COMMAND))
                assert bob.write_ids() == [ask_id]
                await bob.tasks.reply(ask_id, "all green")
                done = await a.wait_state(ask.id, pb.TASK_STATE_COMPLETED)
                assert history_roles(done)[-1] == ("ROLE_AGENT", "all green")
                # The owner's command is delivered.
                order = await c.send_task(send_request("run the tests", message_id=new_message_id(), metadata=COMMAND))
                assert order.status.state == pb.TASK_STATE_COMPLETED and ct_meta(order)["completion"] == "delivered"
                assert [(w["kind"], w["from"]) for w in bob.writes()] == [("ask", "alice"), ("command", "carol")]

    run(main)


def test_23_a_worker_refuses_a_non_parent_by_default():
    async def main(root):
        carol_id = agent_id_for("fake", "sess-carol")
        async with agents(root, "carol", "alice", "bob", bob={"role": Role.WORKER, "owner": carol_id}) as ag:
            alice, bob, carol = ag["alice"], ag["bob"], ag["carol"]
            async with sdk(bob.url, alice.token) as a, sdk(bob.url, carol.token) as c:
                refused = await a.send_task(send_request("hello worker", message_id=new_message_id()))
                assert refused.status.state == pb.TASK_STATE_FAILED and ct_meta(refused)["reason"] == "acl:agents"
                ok = await c.send_task(send_request("hello from your parent", message_id=new_message_id()))
                assert ok.status.state == pb.TASK_STATE_COMPLETED
                assert [w["from"] for w in bob.writes()] == ["carol"]

    run(main)
