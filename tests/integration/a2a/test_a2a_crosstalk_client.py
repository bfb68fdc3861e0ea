"""crosstalk's own A2AClient against a real A2AServer: crosstalk records in and out, errors mapped back."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from crosstalk.core.errors import TaskError
from crosstalk.core.message import new_message
from crosstalk.core.tasks import TaskState
from crosstalk.ingress.a2a import (
    A2AAuthError,
    A2AClient,
    A2AOutcomeUnknown,
    A2AProtocolError,
    A2AUnreachable,
    fetch_card,
)
from tests.support.a2a_fake_tasks import ALICE, FakeTasks
from tests.support.a2a_live import run, serving

HOP = "0123456789abcdef01234567"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_send_an_inform_and_read_it_back():
    async def main():
        async with serving() as (server, fake), A2AClient(server.url, "tok-alice") as peer:
            msg = new_message("bob", "hello bob", from_="alice", delivery="next_turn", context_id="ctx-1")
            view = await peer.send(msg)
            assert (view.state, view.completion, view.delivery, view.kind) == (
                TaskState.COMPLETED,
                "delivered",
                "accepted",
                "inform",
            )
            assert view.context_id == "ctx-1" and [h.text for h in view.history] == ["hello bob"]
            sender, got, task_id, immediately = fake.sent[0]
            assert sender == ALICE and task_id is None and not immediately
            for name in ("message_id", "to", "from_", "kind", "delivery", "context_id", "text"):
                assert getattr(got, name) == getattr(msg, name), name
            again = await peer.get(view.task_id)
            assert again.state is TaskState.COMPLETED and again.task_id == view.task_id

    run(main())


def test_an_ask_waits_for_its_reply_with_every_field_carried():
    async def main():
        async with serving() as (server, fake), A2AClient(server.url, "tok-alice") as peer:
            msg = new_message(
                "bob", "which branch?", kind="ask", delivery="steer", in_reply_to="m-0", deadline_seconds=20
            ).with_(hop_chain=(HOP,))
            sending = asyncio.create_task(peer.send(msg))
            while not fake.tasks:
                await asyncio.sleep(0.01)
            fake.reply(fake.task_ids()[0], "main")
            view = await sending
            got = fake.sent[0][1]
            assert (got.kind.value, got.delivery.value, got.in_reply_to, got.deadline_seconds, got.hop_chain) == (
                "ask",
                "steer",
                "m-0",
                20,
                (HOP,),
            )
            assert view.completion == "replied" and view.history[-1].role == "agent"
            assert view.history[-1].text == "main" and view.history[-1].metadata == {"from": "receiver"}

    run(main())


def test_return_immediately_list_cancel_and_task_errors():
    async def main():
        fake = FakeTasks()
        async with serving(fake) as (server, _), A2AClient(server.url, "tok-alice") as peer:
            submitted = await peer.send(new_message("bob", "later"), return_immediately=True)
            assert submitted.state is TaskState.SUBMITTED and fake.sent[0][3] is True
            done = await peer.send(new_message("bob", "now"))
            page = await peer.list(page_size=1)
            assert [t.task_id for t in page.tasks] == [done.task_id] and page.total_size == 2 and page.next_page_token
            rest = await peer.list(page_size=1, page_token=page.next_page_token)
            assert [t.task_id for t in rest.tasks] == [submitted.task_id] and rest.next_page_token == ""
            only_submitted = await peer.list(state=TaskState.SUBMITTED)
            assert [t.task_id for t in only_submitted.tasks] == [submitted.task_id]
            assert fake.calls[-1][-1] is TaskState.SUBMITTED

            canceled = await peer.cancel(submitted.task_id)
            assert canceled.state is TaskState.CANCELED

            async def code_of(coro):
                with pytest.raises(TaskError) as info:
                    await coro
                return info.value.code

            assert await code_of(peer.cancel(submitted.task_id)) == TaskError.NOT_CANCELABLE
            assert await code_of(peer.get("task-9999")) == TaskError.NOT_FOUND
            assert await code_of(peer.send(new_message("bob", "more"), task_id=done.task_id)) == TaskError.UNSUPPORTED
            fake.invalid_reason = "hop chain repeats"
            assert await code_of(peer.send(new_message("bob", "x"))) == TaskError.INVALID
            async with A2AClient(server.url, "tok-bob") as bob:
                assert await code_of(bob.get(done.task_id)) == TaskError.NOT_FOUND

    run(main())


def test_a_refused_token_is_an_auth_error_and_nothing_is_sent():
    async def main():
        async with serving() as (server, fake), A2AClient(server.url, "not-a-token") as peer:
            with pytest.raises(A2AAuthError) as info:
                await peer.send(new_message("bob", "hi"))
            assert info.value.status == 401
            with pytest.raises(A2AAuthError):
                await peer.list()
        assert fake.calls == []

    run(main())


def test_nobody_listening_is_unreachable_not_unknown():
    async def main():
        url = f"http://127.0.0.1:{free_port()}/"
        async with A2AClient(url, "tok-alice", timeout=5) as peer:
            with pytest.raises(A2AUnreachable) as info:
                await peer.send(new_message("bob", "hi"))
            assert not isinstance(info.value, A2AOutcomeUnknown)
        with pytest.raises(A2AUnreachable):
            await fetch_card(url, timeout=5)

    run(main())


def test_a_slow_answer_is_outcome_unknown():
    async def main():
        fake = FakeTasks()
        fake.send_delay = 3.0
        async with serving(fake) as (server, _), A2AClient(server.url, "tok-alice", timeout=0.5) as peer:
            with pytest.raises(A2AOutcomeUnknown):
                await peer.send(new_message("bob", "hi"))

    run(main())


def test_closing_the_server_under_a_waiting_send_is_bounded():
    async def main():
        fake = FakeTasks()
        async with serving(fake) as (server, _):
            peer = A2AClient(server.url, "tok-alice")
            try:
                pending = asyncio.create_task(peer.send(new_message("bob", "wait", kind="ask", deadline_seconds=60)))
                while not fake.tasks:
                    await asyncio.sleep(0.01)
                started = time.monotonic()
                await server.close()
                assert time.monotonic() - started < 8
                with pytest.raises(A2AOutcomeUnknown):
                    await asyncio.wait_for(pending, 10)
            finally:
                await peer.close()

    run(main())


def test_fetch_card_and_a_wrong_path():
    async def main():
        async with serving() as (server, _):
            card = await fetch_card(server.url)
            assert card["name"] == "bob" and card["supportedInterfaces"][0]["url"] == server.url
        async with serving() as (server, _):
            with pytest.raises(A2AProtocolError) as info:
                await fetch_card(server.url + "nowhere/")
            assert info.value.status == 401  # only the well-known card path is public

    run(main())


def test_the_client_opens_without_async_with():
    async def main():
        async with serving() as (server, _):
            peer = A2AClient(server.url, "tok-alice")
            try:
                assert (await peer.send(new_message("bob", "hi"))).state is TaskState.COMPLETED
            finally:
                await peer.close()
                await peer.close()  # idempotent

    run(main())


def test_a_default_wait_ask_waits_past_the_client_timeout_up_to_its_deadline():
    async def main():
        async with serving() as (server, fake), A2AClient(server.url, "tok-alice", timeout=0.5) as peer:
            sending = asyncio.create_task(peer.send(new_message("bob", "slow?", kind="ask", deadline_seconds=5)))
            while not fake.tasks:
                await asyncio.sleep(0.01)
            await asyncio.sleep(1.0)  # twice the client timeout
            fake.reply(fake.task_ids()[0], "yes")
            view = await asyncio.wait_for(sending, 10)
            assert view.completion == "replied"

    run(main())
