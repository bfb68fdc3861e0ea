"""A real A2AServer driven by the official a2a-sdk client (card resolution, bearer via its AuthInterceptor)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict

import crosstalk
from crosstalk.core.kinds import Delivery, Kind
from tests.support.a2a_fake_tasks import ALICE, FakeTasks
from tests.support.a2a_live import run, sdk_client, serving

HOP = "0123456789abcdef01234567"


def send_request(text="hello", message_id="m-1", metadata=None, task_id="", **config) -> pb.SendMessageRequest:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    if metadata is not None:
        message["metadata"] = metadata
    if task_id:
        message["taskId"] = task_id
    return ParseDict({"message": message, "configuration": config}, pb.SendMessageRequest())


async def send(client, ctx, request) -> pb.Task:
    events = [event async for event in client.send_message(request, context=ctx)]
    assert len(events) == 1 and events[0].HasField("task")
    return events[0].task


def crosstalk_meta(task: pb.Task) -> dict:
    return MessageToDict(task.metadata)["crosstalk"]


def test_card_resolves_with_the_sdk_resolver():
    async def main():
        async with serving() as (server, _), sdk_client(server.url) as (client, _ctx):
            card = client._card  # what A2ACardResolver parsed
            assert (card.name, card.version) == ("bob", crosstalk.__version__)
            assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
                (server.url, "JSONRPC", "1.0"),
                (server.url, "JSONRPC", "0.3"),  # the same endpoint, for A2A 0.3 clients (Gemini CLI's)
            ]
            assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
            assert card.security_schemes["bearer"].http_auth_security_scheme.scheme.lower() == "bearer"
            assert not card.capabilities.streaming and not card.capabilities.push_notifications

    run(main())


def test_plain_text_send_is_an_inform_with_auto_delivery():
    async def main():
        async with serving() as (server, fake), sdk_client(server.url) as (client, ctx):
            task = await send(client, ctx, send_request("hi bob"))
            assert task.status.state == pb.TASK_STATE_COMPLETED
            assert crosstalk_meta(task) == {"completion": "delivered", "delivery": "accepted", "kind": "inform"}
            [(sender, msg, task_id, immediately)] = fake.sent
            assert sender == ALICE and task_id is None and immediately is False
            assert (msg.kind, msg.delivery, msg.text, msg.to, msg.message_id) == (
                Kind.INFORM,
                Delivery.AUTO,
                "hi bob",
                "bob",
                "m-1",
            )
            assert [m.message_id for m in task.history] == ["m-1"]

    run(main())


def test_metadata_round_trip_and_an_answered_ask():
    async def main():
        async with serving() as (server, fake), sdk_client(server.url) as (client, ctx):
            meta = {
                "crosstalk": {
                    "kind": "ask",
                    "delivery": "steer",
                    "deadline_seconds": 20,
                    "in_reply_to": "m-0",
                    "hop_chain": [HOP],
                    "from": "alice",
                }
            }
            sending = asyncio.create_task(send(client, ctx, send_request("which file?", metadata=meta)))
            while not fake.tasks:
                await asyncio.sleep(0.01)
            [task_id] = fake.task_ids()
            fake.reply(task_id, "src/main.py")
            task = await sending
            msg = fake.sent[0][1]
            assert (msg.kind, msg.delivery, msg.deadline_seconds, msg.in_reply_to, msg.hop_chain, msg.from_) == (
                Kind.ASK,
                Delivery.STEER,
                20,
                "m-0",
                (HOP,),
                "alice",
            )
            assert task.status.state == pb.TASK_STATE_COMPLETED
            assert task.status.message.role == pb.ROLE_AGENT and task.status.message.parts[0].text == "src/main.py"
            assert crosstalk_meta(task)["completion"] == "replied"
            assert [m.role for m in task.history] == [pb.ROLE_USER, pb.ROLE_AGENT]

    run(main())


def test_return_immediately_get_list_cancel():
    async def main():
        async with serving() as (server, fake), sdk_client(server.url) as (client, ctx):
            task = await send(client, ctx, send_request(returnImmediately=True))
            assert task.status.state == pb.TASK_STATE_SUBMITTED and fake.sent[0][3] is True
            got = await client.get_task(pb.GetTaskRequest(id=task.id), context=ctx)
            assert got.status.state == pb.TASK_STATE_SUBMITTED
            listed = await client.list_tasks(pb.ListTasksRequest(), context=ctx)
            assert [t.id for t in listed.tasks] == [task.id] and listed.total_size == 1
            assert listed.next_page_token == ""
            canceled = await client.cancel_task(pb.CancelTaskRequest(id=task.id), context=ctx)
            assert canceled.status.state == pb.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(pb.CancelTaskRequest(id=task.id), context=ctx)
            with pytest.raises(TaskNotFoundError):
                await client.get_task(pb.GetTaskRequest(id="task-9999"), context=ctx)

    run(main())


def test_tasks_are_only_their_creators():
    async def main():
        async with serving() as (server, _fake):
            async with sdk_client(server.url, "tok-alice") as (alice, actx):
                task = await send(alice, actx, send_request(returnImmediately=True))
            async with sdk_client(server.url, "tok-bob") as (bob, bctx):
                with pytest.raises(TaskNotFoundError):
                    await bob.get_task(pb.GetTaskRequest(id=task.id), context=bctx)
                with pytest.raises(TaskNotFoundError):
                    await bob.cancel_task(pb.CancelTaskRequest(id=task.id), context=bctx)
                with pytest.raises(TaskNotFoundError):  # a continuation by someone else
                    await send(bob, bctx, send_request("me too", message_id="m-b", task_id=task.id))
                listed = await bob.list_tasks(pb.ListTasksRequest(), context=bctx)
                assert list(listed.tasks) == [] and listed.total_size == 0

    run(main())


def test_continuations_and_a_terminal_task():
    async def main():
        async with serving() as (server, fake), sdk_client(server.url) as (client, ctx):
            open_task = await send(client, ctx, send_request("first", returnImmediately=True))
            more = await send(client, ctx, send_request("second", message_id="m-2", task_id=open_task.id))
            assert more.id == open_task.id and [m.message_id for m in more.history] == ["m-1", "m-2"]
            assert fake.sent[-1][2] == open_task.id and fake.sent[-1][1].task_id == open_task.id
            done = await send(client, ctx, send_request("third", message_id="m-3"))
            assert done.status.state == pb.TASK_STATE_COMPLETED
            with pytest.raises(UnsupportedOperationError):
                await send(client, ctx, send_request("fourth", message_id="m-4", task_id=done.id))

    run(main())


def test_list_pages_and_history_length():
    async def main():
        async with serving() as (server, _fake), sdk_client(server.url) as (client, ctx):
            ids = [(await send(client, ctx, send_request(f"n{i}", message_id=f"m-{i}"))).id for i in range(3)]
            first = await client.list_tasks(pb.ListTasksRequest(page_size=2, history_length=0), context=ctx)
            assert [t.id for t in first.tasks] == ids[::-1][:2] and first.total_size == 3
            assert all(len(t.history) == 0 for t in first.tasks) and first.next_page_token
            second = await client.list_tasks(
                pb.ListTasksRequest(page_size=2, page_token=first.next_page_token), context=ctx
            )
            assert [t.id for t in second.tasks] == [ids[0]] and second.next_page_token == ""
            done = await client.list_tasks(pb.ListTasksRequest(status=pb.TASK_STATE_COMPLETED), context=ctx)
            assert done.total_size == 3
            working = await client.list_tasks(pb.ListTasksRequest(status=pb.TASK_STATE_WORKING), context=ctx)
            assert working.total_size == 0
            got = await client.get_task(pb.GetTaskRequest(id=ids[0], history_length=0), context=ctx)
            assert len(got.history) == 0

    run(main())


def test_the_sdk_client_without_a_token_is_refused():
    async def main():
        fake = FakeTasks()
        async with serving(fake) as (server, _), sdk_client(server.url, token=None) as (client, ctx):
            with pytest.raises(A2AClientError) as info:
                await send(client, ctx, send_request())
            assert isinstance(info.value.__cause__, httpx.HTTPStatusError)
            assert info.value.__cause__.response.status_code == 401
        assert fake.calls == []

    run(main())
