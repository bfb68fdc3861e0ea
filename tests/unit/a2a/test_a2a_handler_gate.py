"""The request handler called directly, and the edge gate driven as a bare ASGI app (no sockets)."""

from __future__ import annotations

import asyncio
import json

import pytest
from a2a.server.context import ServerCallContext
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import ParseDict

from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.tasks import TaskState
from crosstalk.ingress.a2a.gate import CARD_PATH, EdgeGate
from crosstalk.ingress.a2a.handler import SENDER_STATE_KEY, A2ARequestHandler
from crosstalk.ingress.a2a.server import build_card
from tests.support.a2a_fake_tasks import ALICE, BOB, FakeTasks, authenticate
from tests.support.bounded import run_bounded

WAIT_S = 10.0


def run(coro):
    return run_bounded(coro, WAIT_S)


def ctx(sender: Sender | None = ALICE) -> ServerCallContext:
    return ServerCallContext(state={SENDER_STATE_KEY: sender} if sender else {})


def send_request(text: str = "hi", **config) -> pb.SendMessageRequest:
    return ParseDict(
        {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}, "configuration": config},
        pb.SendMessageRequest(),
    )


# ------------------------------------------------------------------ handler


def test_send_passes_sender_message_and_return_immediately():
    fake = FakeTasks()
    handler = A2ARequestHandler(fake, to="receiver")
    task = run(handler.on_message_send(send_request(returnImmediately=True), ctx()))
    assert task.status.state == pb.TASK_STATE_SUBMITTED
    sender, msg, task_id, immediately = fake.sent[0]
    assert sender is ALICE and msg.to == "receiver" and msg.text == "hi" and task_id is None and immediately


def test_send_history_length_and_its_validation():
    handler = A2ARequestHandler(FakeTasks(), to="receiver")
    task = run(handler.on_message_send(send_request(historyLength=0), ctx()))
    assert task.status.state == pb.TASK_STATE_COMPLETED and list(task.history) == []
    with pytest.raises(InvalidParamsError):
        run(handler.on_message_send(send_request(historyLength=-1), ctx()))


def test_missing_required_fields_are_invalid_params_before_the_service():
    fake = FakeTasks()
    handler = A2ARequestHandler(fake, to="receiver")
    with pytest.raises(InvalidParamsError):
        run(handler.on_message_send(pb.SendMessageRequest(), ctx()))
    with pytest.raises(InvalidParamsError):
        run(handler.on_get_task(pb.GetTaskRequest(), ctx()))
    assert fake.calls == []


def test_no_sender_in_the_context_is_an_internal_error_and_never_reaches_the_service():
    fake = FakeTasks()
    handler = A2ARequestHandler(fake, to="receiver")
    with pytest.raises(InternalError):
        run(handler.on_message_send(send_request(), ctx(None)))
    with pytest.raises(InternalError):
        run(handler.on_list_tasks(pb.ListTasksRequest(), ctx(Sender(SenderClass.VERIFIED, None, "x", "a2a"))))
    assert fake.calls == []


def test_an_unexpected_service_failure_is_an_opaque_internal_error():
    fake = FakeTasks()
    fake.raise_next = RuntimeError("disk /home/someone/.local/state/crosstalk is full")
    handler = A2ARequestHandler(fake, to="receiver")
    with pytest.raises(InternalError) as info:
        run(handler.on_get_task(pb.GetTaskRequest(id="t"), ctx()))
    assert "/home" not in info.value.message and info.value.message == "GetTask failed inside the agent"


def test_list_validates_page_size_and_passes_the_timestamp_filter():
    fake = FakeTasks()
    handler = A2ARequestHandler(fake, to="receiver")
    for size in (0, 101):
        with pytest.raises(InvalidParamsError):
            run(handler.on_list_tasks(pb.ListTasksRequest(page_size=size), ctx()))
    assert fake.calls == []
    request = pb.ListTasksRequest()
    request.status_timestamp_after.FromMilliseconds(1_500)
    run(handler.on_list_tasks(request, ctx()))
    assert fake.updated_after == 1.5


def test_list_defaults_and_filters():
    fake = FakeTasks()
    handler = A2ARequestHandler(fake, to="receiver")
    run(handler.on_message_send(send_request(), ctx()))
    page = run(handler.on_list_tasks(pb.ListTasksRequest(status=pb.TASK_STATE_COMPLETED, context_id="c"), ctx()))
    assert fake.calls[-1] == ("list", ALICE.agent_id, 50, "", "c", TaskState.COMPLETED)
    assert page.page_size == 50 and page.total_size == 0
    calls = len(fake.calls)
    none = run(handler.on_list_tasks(pb.ListTasksRequest(status=pb.TASK_STATE_AUTH_REQUIRED), ctx()))
    assert (list(none.tasks), none.next_page_token, none.total_size) == ([], "", 0)
    assert len(fake.calls) == calls  # a state crosstalk never uses matches nothing, without asking the service


def test_streaming_push_and_extended_card_answer_the_mandated_errors():
    handler = A2ARequestHandler(FakeTasks(), to="receiver")

    async def first(gen):
        return await anext(gen)

    with pytest.raises(UnsupportedOperationError, match="Streaming"):
        run(first(handler.on_message_send_stream(send_request(), ctx())))
    with pytest.raises(UnsupportedOperationError, match="Streaming"):
        run(first(handler.on_subscribe_to_task(pb.SubscribeToTaskRequest(id="t"), ctx())))
    for call in (
        handler.on_create_task_push_notification_config(pb.TaskPushNotificationConfig(), ctx()),
        handler.on_get_task_push_notification_config(pb.GetTaskPushNotificationConfigRequest(), ctx()),
        handler.on_list_task_push_notification_configs(pb.ListTaskPushNotificationConfigsRequest(), ctx()),
        handler.on_delete_task_push_notification_config(pb.DeleteTaskPushNotificationConfigRequest(), ctx()),
    ):
        with pytest.raises(PushNotificationNotSupportedError):
            run(call)
    with pytest.raises(UnsupportedOperationError, match="extended agent card"):
        run(handler.on_get_extended_agent_card(pb.GetExtendedAgentCardRequest(), ctx()))


def test_card_shape():
    card = build_card(name="bob", description="a session", url="http://127.0.0.1:1/")
    assert card.capabilities.HasField("streaming") and not card.capabilities.streaming
    assert not card.capabilities.push_notifications and not card.capabilities.extended_agent_card
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("http://127.0.0.1:1/", "JSONRPC", "1.0"),
        ("http://127.0.0.1:1/", "JSONRPC", "0.3"),  # the same endpoint, for A2A 0.3 clients (Gemini CLI's)
    ]
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
    assert [s.id for s in card.skills] == ["message"]


def test_card_text_may_not_hold_the_cwd():
    import os

    from crosstalk.ingress.a2a.server import A2AServer

    with pytest.raises(ValueError, match="filesystem path"):
        A2AServer(name="x", description=f"works in {os.getcwd()}", tasks=FakeTasks(), authenticate=authenticate, to="x")


# ------------------------------------------------------------------ edge gate as bare ASGI


class Downstream:
    def __init__(self):
        self.calls = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.calls.append((scope, body))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def drive(gate, *, path="/", headers=(), chunks=(b"",), query=b""):
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": query,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
    }
    incoming = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    incoming.append({"type": "http.disconnect"})
    sent = []

    async def receive():
        return incoming.pop(0)

    async def send(message):
        sent.append(message)

    run(gate(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body, incoming


def make_gate(limit=1024, auth=authenticate):
    down = Downstream()
    return EdgeGate(down, authenticate=auth, body_limit=limit), down


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("Authorization", "Bearer nope"),),
        (("Authorization", "Basic dG9rLWFsaWNl"),),
        (("Authorization", "Bearer "),),
        (("Authorization", "tok-alice"),),
    ],
)
def test_gate_refuses_without_a_known_bearer(headers):
    gate, down = make_gate()
    status, hdrs, body, _ = drive(gate, headers=headers, chunks=(b'{"jsonrpc":"2.0"}',))
    assert status == 401 and hdrs[b"www-authenticate"].startswith(b"Bearer")
    err = json.loads(body)
    assert err["jsonrpc"] == "2.0" and err["id"] is None and err["error"]["code"] == -32000
    assert down.calls == []


def test_gate_passes_the_sender_and_the_body():
    gate, down = make_gate()
    status, _, body, _ = drive(gate, headers=(("Authorization", "bearer tok-bob"),), chunks=(b"ab", b"cd"))
    assert (status, body) == (200, b"ok")
    scope, seen = down.calls[0]
    assert seen == b"abcd" and scope["state"][SENDER_STATE_KEY] is BOB


def test_gate_refuses_unverified_senders_and_a_raising_authenticate():
    def weird(token):
        if token == "raise":
            raise RuntimeError("boom")
        return Sender(SenderClass.UNVERIFIED, None, "someone", "a2a")

    gate, down = make_gate(auth=weird)
    for token in ("raise", "other"):
        status, *_ = drive(gate, headers=(("Authorization", f"Bearer {token}"),))
        assert status == 401
    assert down.calls == []


def test_gate_leaves_the_card_public():
    gate, down = make_gate()
    status, *_ = drive(gate, path=CARD_PATH)
    assert status == 200 and len(down.calls) == 1


@pytest.mark.parametrize("chunks", [(b"x" * 1025,), (b"x" * 600, b"x" * 600, b"x" * 600)])
def test_gate_caps_the_body_with_a_jsonrpc_error(chunks):
    gate, down = make_gate(limit=1024)
    status, hdrs, body, left = drive(gate, headers=(("Authorization", "Bearer tok-alice"),), chunks=chunks)
    assert status == 200 and hdrs[b"content-type"] == b"application/json"
    err = json.loads(body)
    assert err["id"] is None and err["error"]["code"] == -32600 and "1024-byte limit" in err["error"]["message"]
    assert down.calls == []
    assert left == [{"type": "http.disconnect"}]  # the refused body was drained, not left unread


def test_gate_body_exactly_at_the_limit_passes():
    gate, down = make_gate(limit=1024)
    status, *_ = drive(gate, headers=(("Authorization", "Bearer tok-alice"),), chunks=(b"x" * 1024,))
    assert status == 200 and down.calls[0][1] == b"x" * 1024


def test_gate_takes_the_version_from_the_query_string_only_when_the_header_is_absent():
    gate, down = make_gate()
    drive(gate, headers=(("Authorization", "Bearer tok-alice"),), query=b"A2A-Version=1.0")
    drive(gate, headers=(("Authorization", "Bearer tok-alice"), ("A2A-Version", "0.3")), query=b"A2A-Version=1.0")
    first, second = (dict(scope["headers"]) for scope, _ in down.calls)
    assert first[b"a2a-version"] == b"1.0"
    assert second[b"a2a-version"] == b"0.3"


def test_gate_accepts_an_async_authenticate():
    async def auth(token):
        await asyncio.sleep(0)
        return authenticate(token)

    gate, down = make_gate(auth=auth)
    assert drive(gate, headers=(("Authorization", "Bearer tok-alice"),))[0] == 200
    assert drive(gate, headers=(("Authorization", "Bearer nope"),))[0] == 401
    assert len(down.calls) == 1 and down.calls[0][0]["state"][SENDER_STATE_KEY] is ALICE
