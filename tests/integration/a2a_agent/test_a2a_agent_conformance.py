"""The A2A conformance matrix, sections (a)–(j) below, against REAL agents over loopback.

Alice, bob (and carol where a second or third sender is needed) are real AgentHosts sharing one state root; the
official a2a-sdk client resolves bob's card and presents alice's own bearer token (her 0600 credential file), so
bob sees a verified sender "alice". Bob's FakeHarness records every write into his "session" (in memory and in
his inbox file), which is how each test proves what was injected and how often.
"""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

import crosstalk
from crosstalk.core.ids import new_message_id
from crosstalk.registry.discovery import resolve
from crosstalk.tasks.ledger import ReplyError
from tests.support.a2a_agents import (
    WAIT_S,
    agents,
    alice_to_bob,
    ct_meta,
    error_of,
    history_roles,
    received_ids,
    rpc,
    run,
    sdk,
    send_request,
    text_message,
    until,
    until_token_refused,
)

CARD_PATH = "/.well-known/agent-card.json"
ASK = {"crosstalk": {"kind": "ask"}}


def no_cors(response: httpx.Response) -> None:
    cors = [k for k in response.headers if k.lower().startswith("access-control-")]
    assert cors == [], f"CORS header on {response.request.method} {response.request.url}: {cors}"


# ---------------------------------------------------------------------- (a) the Agent Card


def test_a_card_validates_with_the_sdk_resolver():
    async def main(root):
        async with alice_to_bob(root) as (_alice, bob, client):
            card = client.card  # what A2ACardResolver fetched and parsed
            assert card.name == "bob" and card.version == crosstalk.__version__
            assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
                (bob.url, "JSONRPC", "1.0"),
                (bob.url, "JSONRPC", "0.3"),  # the same endpoint, for A2A 0.3 clients (Gemini CLI's)
            ]
            assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
            assert card.security_schemes["bearer"].http_auth_security_scheme.scheme.lower() == "bearer"
            caps = card.capabilities
            assert not (caps.streaming or caps.push_notifications or caps.extended_agent_card)
            # The card the SDK resolved is the agent's, and the registry publishes the same URL.
            assert resolve(bob.paths, "bob").a2a_url == bob.url

            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                got = await http.get(bob.url.rstrip("/") + CARD_PATH, headers={"Origin": "https://evil.example"})
                assert got.status_code == 200 and got.headers["cache-control"]
                no_cors(got)
                text = got.text
                for path in {str(root), os.getcwd(), os.path.expanduser("~")}:
                    assert path not in text, f"the public card leaks a path: {path}"
                assert "cwd" not in got.json()
                preflight = await http.options(
                    bob.url,
                    headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
                )
                no_cors(preflight)
                assert preflight.status_code == 401  # only the card is public

    run(main)


# ---------------------------------------------------------------------- (b) (d) default wait, GetTask


def test_b_d_plain_text_default_wait_returns_completed_delivered_and_gettask_agrees():
    async def main(root):
        async with alice_to_bob(root) as (alice, bob, client):
            mid = new_message_id()
            event = await client.send(send_request("hi bob, plain text", message_id=mid))
            assert event.HasField("task") and not event.HasField("message")
            task = event.task
            # (b) returned only in a terminal state: completed, delivered.
            assert task.status.state == pb.TASK_STATE_COMPLETED
            meta = ct_meta(task)
            answer = meta.pop("answer")  # the delivery answer record, as the sender's tools show it
            assert meta == {"completion": "delivered", "delivery": "accepted", "kind": "inform"}
            assert (answer["state"], answer["message_id"], answer["task_id"]) == ("accepted", mid, task.id)
            assert [m.message_id for m in task.history] == [mid]
            # The text is inside the session, once, from the verified sender alice.
            [line] = bob.inbox_lines()
            assert (line["message_id"], line["text"], line["from"], line["sender_class"], line["kind"]) == (
                mid,
                "hi bob, plain text",
                "alice",
                "verified",
                "inform",
            )
            assert 'from-name="alice"' in line["rendered"] and "hi bob, plain text" in line["rendered"]
            assert bob.write_ids() == [mid]
            # (d) GetTask after SendMessage returned shows completed.
            got = await client.get(task.id)
            assert got.status.state == pb.TASK_STATE_COMPLETED and ct_meta(got)["completion"] == "delivered"
            assert history_roles(got) == [("ROLE_USER", "hi bob, plain text")]
            # The journal holds the task, created by alice.
            recs = await bob.records()
            tasks = [r for r in recs if r.get("type") == "task" and r["task_id"] == task.id]
            assert tasks and {r["creator"] for r in tasks} == {alice.agent_id}

    run(main)


def test_b_queued_delivery_also_completes_delivered():
    async def main(root):
        async with alice_to_bob(root, script=["queue"]) as (_alice, bob, client):
            mid = new_message_id()
            task = await client.send_task(send_request("for your next turn", message_id=mid))
            assert task.status.state == pb.TASK_STATE_COMPLETED
            meta = ct_meta(task)
            answer = meta.pop("answer")
            assert meta == {"completion": "delivered", "delivery": "queued", "kind": "inform"}
            assert (answer["state"], answer["message_id"], answer["task_id"]) == ("queued", mid, task.id)
            assert len(bob.writes()) == 1

    run(main)


# ---------------------------------------------------------------------- (c) unknown never reads as completed


@pytest.mark.parametrize("step", ["malformed", "disconnect"])
def test_c_default_wait_with_an_unknown_dispatch_never_returns_completed(step):
    async def main(root):
        async with alice_to_bob(root, script=[step]) as (_alice, bob, client):
            mid = new_message_id()
            task = await client.send_task(send_request("maybe it arrived", message_id=mid))
            assert task.status.state != pb.TASK_STATE_COMPLETED
            assert task.status.state == pb.TASK_STATE_WORKING  # neither completed nor failed: unknown
            meta = ct_meta(task)
            assert meta["delivery"] == "unknown" and "completion" not in meta
            assert bob.write_ids() == [mid]  # the fake did write; the outcome is still unknown
            await asyncio.sleep(0.2)  # what is tested is an absence: time for a (wrong) resend or completion
            again = await client.get(task.id)
            assert again.status.state == pb.TASK_STATE_WORKING and "completion" not in ct_meta(again)
            assert bob.write_ids() == [mid]  # never resent
            outcomes = [r for r in await bob.records() if r.get("type") == "outcome" and r["message_id"] == mid]
            assert [o["state"] for o in outcomes] == ["unknown"]

    run(main)


def test_c_a_definite_refusal_fails_the_task():
    async def main(root):
        async with alice_to_bob(root, script=["refuse"]) as (_alice, bob, client):
            task = await client.send_task(send_request("you are busy", message_id=new_message_id()))
            assert task.status.state == pb.TASK_STATE_FAILED
            assert ct_meta(task)["delivery"] == "unreachable" and "completion" not in ct_meta(task)
            assert bob.writes() == []

    run(main)


# ---------------------------------------------------------------------- (e) asks


def test_e_ask_return_immediately_completes_with_the_sessions_reply():
    async def main(root):
        async with alice_to_bob(root) as (_alice, bob, client):
            mid = new_message_id()
            task = await client.send_task(
                send_request("what is 6*7?", message_id=mid, metadata=ASK, returnImmediately=True)
            )
            assert task.status.state == pb.TASK_STATE_SUBMITTED
            await until(lambda: bob.write_ids() == [mid], "the ask reached bob's session")
            working = await client.wait_delivered(task.id)
            assert ct_meta(working)["delivery"] == "accepted" and ct_meta(working)["kind"] == "ask"
            assert bob.inbox_lines()[0]["kind"] == "ask"
            # Bob's session replies (the reply tool's path).
            await bob.tasks.reply(mid, "42")
            done = await client.wait_state(task.id, pb.TASK_STATE_COMPLETED)
            assert ct_meta(done)["completion"] == "replied"
            assert done.status.HasField("message")
            assert done.status.message.role == pb.ROLE_AGENT
            assert [p.text for p in done.status.message.parts] == ["42"]
            assert history_roles(done) == [("ROLE_USER", "what is 6*7?"), ("ROLE_AGENT", "42")]
            assert bob.write_ids() == [mid]  # the reply is not another injection

    run(main)


def test_e_ask_default_wait_returns_the_scripted_answer():
    async def main(root):
        async with alice_to_bob(root, answer="yes, done") as (_alice, _bob, client):
            task = await client.send_task(send_request("are you done?", message_id=new_message_id(), metadata=ASK))
            assert task.status.state == pb.TASK_STATE_COMPLETED
            assert [p.text for p in task.status.message.parts] == ["yes, done"]
            assert history_roles(task)[-1] == ("ROLE_AGENT", "yes, done")

    run(main)


def test_e_an_unanswered_ask_fails_at_its_deadline():
    async def main(root):
        async with alice_to_bob(root) as (_alice, bob, client):
            mid = new_message_id()
            meta = {"crosstalk": {"kind": "ask", "deadline_seconds": 1}}
            task = await client.send_task(send_request("quick?", message_id=mid, metadata=meta))
            assert task.status.state == pb.TASK_STATE_FAILED and ct_meta(task)["reason"] == "deadline_passed"
            assert bob.write_ids() == [mid]
            with pytest.raises(ReplyError) as info:
                await bob.tasks.reply(mid, "too late")
            assert info.value.code == ReplyError.ASK_CLOSED

    run(main)


# ---------------------------------------------------------------------- (f) CancelTask


def test_f_cancel_unclaimed_submitted_task_then_claimed_and_terminal_are_not_cancelable():
    async def main(root):
        async with alice_to_bob(root, script=["block"]) as (_alice, bob, client):
            first, second = new_message_id(), new_message_id()
            t1 = await client.send_task(send_request("one", message_id=first, returnImmediately=True))
            await asyncio.wait_for(bob.fake.blocked.wait(), WAIT_S)  # t1 claimed, held inside the harness
            t2 = await client.send_task(send_request("two", message_id=second, returnImmediately=True))
            assert t2.status.state == pb.TASK_STATE_SUBMITTED
            canceled = await client.cancel(t2.id)
            assert canceled.status.state == pb.TASK_STATE_CANCELED
            assert (await client.get(t2.id)).status.state == pb.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError):  # claimed (in dispatch)
                await client.cancel(t1.id)
            with pytest.raises(TaskNotCancelableError):  # canceled is terminal
                await client.cancel(t2.id)
            bob.fake.release()
            done = await client.wait_state(t1.id, pb.TASK_STATE_COMPLETED)
            assert ct_meta(done)["completion"] == "delivered"
            with pytest.raises(TaskNotCancelableError):  # completed is terminal
                await client.cancel(t1.id)
            await asyncio.sleep(0.2)  # what is tested is an absence: time for a (wrong) write to show
            assert bob.write_ids() == [first]  # the canceled one was never written
            recs = await bob.records()
            assert [o["state"] for o in recs if o.get("type") == "outcome" and o["message_id"] == second] == [
                "rejected"
            ]
            assert not [r for r in recs if r.get("type") == "dispatch" and r["message_id"] == second]

    run(main)


# ---------------------------------------------------------------------- (g) continuations of terminal / unknown tasks


def test_g_terminal_task_id_is_unsupported_and_unknown_task_id_is_not_found():
    async def main(root):
        async with alice_to_bob(root) as (_alice, bob, client):
            done = await client.send_task(send_request("first", message_id=new_message_id()))
            assert done.status.state == pb.TASK_STATE_COMPLETED
            with pytest.raises(UnsupportedOperationError):
                await client.send(send_request("more", message_id=new_message_id(), task_id=done.id))
            with pytest.raises(TaskNotFoundError):
                await client.send(send_request("more", message_id=new_message_id(), task_id=new_message_id()))
            assert len(bob.writes()) == 1

    run(main)


def test_g_continuation_of_an_open_task_is_delivered_into_the_same_task():
    async def main(root):
        async with alice_to_bob(root) as (_alice, bob, client):
            ask_id, more_id = new_message_id(), new_message_id()
            t = await client.send_task(send_request("q?", message_id=ask_id, metadata=ASK, returnImmediately=True))
            await client.wait_delivered(t.id)
            cont = await client.send_task(send_request("more context", message_id=more_id, task_id=t.id))
            assert cont.id == t.id and cont.status.state == pb.TASK_STATE_WORKING
            assert [m.message_id for m in cont.history] == [ask_id, more_id]
            assert bob.write_ids() == [ask_id, more_id]
            await bob.tasks.reply(more_id, "answered")  # any message id of the task names it
            done = await client.wait_state(t.id, pb.TASK_STATE_COMPLETED)
            assert history_roles(done)[-1] == ("ROLE_AGENT", "answered")

    run(main)


# ---------------------------------------------------------------------- (h) ListTasks


def test_h_list_tasks_returns_only_the_callers_tasks():
    async def main(root):
        async with agents(root, "alice", "bob", "carol") as ag:
            alice, bob, carol = ag["alice"], ag["bob"], ag["carol"]
            async with sdk(bob.url, alice.token) as a, sdk(bob.url, carol.token) as c:
                a1 = await a.send_task(send_request("a1", message_id=new_message_id()))
                a2 = await a.send_task(send_request("a2", message_id=new_message_id(), returnImmediately=True))
                c1 = await c.send_task(send_request("c1", message_id=new_message_id()))
                await a.wait_state(a2.id, pb.TASK_STATE_COMPLETED)
                mine = await a.list()
                assert {t.id for t in mine.tasks} == {a1.id, a2.id} and mine.total_size == 2
                theirs = await c.list()
                assert [t.id for t in theirs.tasks] == [c1.id] and theirs.total_size == 1
                with pytest.raises(TaskNotFoundError):
                    await c.get(a1.id)
                with pytest.raises(TaskNotFoundError):
                    await a.cancel(c1.id)
                # Bob saw each message from its verified sender.
                assert {(w["text"], w["from"]) for w in bob.writes()} == {
                    ("a1", "alice"),
                    ("a2", "alice"),
                    ("c1", "carol"),
                }

    run(main)


# ---------------------------------------------------------------------- (i) bearer tokens


def test_i_no_wrong_or_stale_token_is_refused_and_nothing_is_injected():
    async def main(root):
        async with agents(root, "alice", "bob", "carol") as ag:
            alice, bob, carol = ag["alice"], ag["bob"], ag["carol"]
            # The SDK client without credentials: HTTP 401.
            async with sdk(bob.url, None) as client:
                with pytest.raises(A2AClientError) as info:
                    await client.send(send_request("no token", message_id=new_message_id()))
                assert isinstance(info.value.__cause__, httpx.HTTPStatusError)
                assert info.value.__cause__.response.status_code == 401
            # A made-up token.
            async with sdk(bob.url, "f" * 64) as client:
                with pytest.raises(A2AClientError) as info:
                    await client.send(send_request("forged", message_id=new_message_id()))
                assert info.value.__cause__.response.status_code == 401
            # Raw JSON-RPC: no header, wrong scheme, wrong token — each a 401 with a JSON-RPC error body.
            stale = carol.token
            async with httpx.AsyncClient(timeout=WAIT_S) as http:  # while carol runs, her token names her
                live = await rpc(http, bob.url, "GetTask", {"id": "nope"}, token=stale)
                assert live.status_code == 200 and error_of(live)["code"] == -32001
            await carol.close()  # a stopped agent's token stops naming anyone (within bob's liveness cache)
            await until_token_refused(bob.url, stale)
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                params = {"message": text_message("raw", new_message_id())}
                for token in (None, "not-a-token", alice.token + "x", stale):
                    response = await rpc(http, bob.url, "SendMessage", params, token=token)
                    assert response.status_code == 401, (token, response.text)
                    assert error_of(response)["code"] == -32000
                    no_cors(response)
                basic = await http.post(
                    bob.url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params},
                    headers={"Authorization": f"Basic {alice.token}", "A2A-Version": "1.0"},
                )
                assert basic.status_code == 401
                # Other methods are refused the same way (only the card is public).
                for method in ("GetTask", "ListTasks", "CancelTask"):
                    response = await rpc(http, bob.url, method, {"id": "x"}, token="f" * 64)
                    assert response.status_code == 401
            await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) write to show
            assert bob.writes() == [] and bob.inbox_lines() == []
            assert received_ids(await bob.records()) == []
            assert bob.host.tasks is not None and (await bob.tasks.list(alice.agent_id)).total_size == 0

    run(main)


# ---------------------------------------------------------------------- (j) what the card says it does not do


def test_j_streaming_push_and_extended_card_answer_the_spec_mandated_errors():
    async def main(root):
        async with agents(root, "alice", "bob") as ag:
            alice, bob = ag["alice"], ag["bob"]
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                cases = (
                    ("SendStreamingMessage", {"message": text_message("s", new_message_id())}, -32004),
                    ("SubscribeToTask", {"id": "t-1"}, -32004),
                    ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://example.com/h"}, -32003),
                    ("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}, -32003),
                    ("ListTaskPushNotificationConfigs", {"taskId": "t"}, -32003),
                    ("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}, -32003),
                    ("GetExtendedAgentCard", {}, -32004),
                )
                for method, params, code in cases:
                    response = await rpc(http, bob.url, method, params, token=alice.token)
                    assert response.status_code == 200, (method, response.text)
                    assert error_of(response)["code"] == code, (method, response.text)
            # The same through the SDK client and its JSON-RPC transport.
            async with sdk(bob.url, alice.token) as client:
                config = pb.TaskPushNotificationConfig(task_id="t", url="https://example.com/hook")
                with pytest.raises(PushNotificationNotSupportedError):
                    await client.client.create_task_push_notification_config(config, context=client.ctx)
                with pytest.raises(PushNotificationNotSupportedError):
                    await client.client.list_task_push_notification_configs(
                        pb.ListTaskPushNotificationConfigsRequest(task_id="t"), context=client.ctx
                    )
                transport = client.client._transport  # the SDK skips streaming when the card says so: ask anyway
                with pytest.raises(UnsupportedOperationError):
                    request = send_request("stream me", message_id=new_message_id())
                    async for _ in transport.send_message_streaming(request, context=client.ctx):
                        pass
            assert bob.writes() == []  # the streaming request injected nothing

    run(main)


def test_task_json_is_a2a_shaped():
    """A sanity check of the wire form the SDK parsed: camelCase, state enum names, crosstalk metadata."""

    async def main(root):
        async with alice_to_bob(root) as (_alice, _bob, client):
            task = await client.send_task(send_request("shape", message_id=new_message_id()))
            data = MessageToDict(task)
            assert data["status"]["state"] == "TASK_STATE_COMPLETED"
            assert data["metadata"]["crosstalk"]["completion"] == "delivered"
            assert {"id", "contextId", "status", "history"} <= set(data)

    run(main)
