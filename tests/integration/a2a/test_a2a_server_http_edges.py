"""Edge cases over raw HTTP: auth, body cap, card headers, version header, the mandated errors, no CORS anywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from tests.support.a2a_fake_tasks import FakeTasks
from tests.support.a2a_live import ALICE_AUTH, BOB_AUTH, V1, rpc, run, serving, text_message

CARD = "/.well-known/agent-card.json"
BODY_LIMIT = 256 * 1024


class NoCors:
    """An httpx response hook: every response the server sends is checked for CORS headers."""

    def __init__(self):
        self.seen = 0

    async def __call__(self, response: httpx.Response) -> None:
        self.seen += 1
        cors = [k for k in response.headers if k.lower().startswith("access-control-")]
        assert cors == [], f"CORS header on {response.request.method} {response.request.url}: {cors}"


def http(hook: NoCors | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=30, event_hooks={"response": [hook or NoCors()]})


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return body["error"]


async def call(client, url, method, params=None, headers=ALICE_AUTH, rid=1) -> httpx.Response:
    return await client.post(url, json=rpc(method, params, rid), headers=headers)


def test_card_is_public_cached_and_tells_nothing_about_where_it_runs():
    async def main():
        hook = NoCors()
        async with serving() as (server, fake), http(hook) as client:
            response = await client.get(server.url.rstrip("/") + CARD, headers={"Origin": "https://evil.example"})
            assert response.status_code == 200
            assert response.headers["cache-control"] == "max-age=60" and response.headers["etag"]
            text = response.text
            for path in {os.getcwd(), str(Path.home()), str(Path(__file__).parent)}:
                assert path not in text
            card = response.json()
            assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
            assert card["capabilities"] == {"streaming": False, "pushNotifications": False, "extendedAgentCard": False}
            again = await client.get(server.url.rstrip("/") + CARD, headers={"If-None-Match": response.headers["etag"]})
            assert again.status_code == 304
            assert fake.calls == [] and hook.seen == 2

    run(main())


@pytest.mark.parametrize(
    "headers",
    [V1, {"Authorization": "Bearer wrong", **V1}, {"Authorization": "tok-alice", **V1}, {"Authorization": "Bearer"}],
)
def test_missing_or_wrong_bearer_is_refused_before_the_service(headers):
    async def main():
        async with serving() as (server, fake), http() as client:
            for method, params in (
                ("SendMessage", {"message": text_message()}),
                ("GetTask", {"id": "task-0001"}),
                ("ListTasks", {}),
                ("CancelTask", {"id": "task-0001"}),
            ):
                response = await call(client, server.url, method, params, headers=headers)
                assert response.status_code == 401
                assert response.headers["www-authenticate"].startswith("Bearer")
                assert error_of(response)["code"] == -32000
                assert response.json()["id"] is None
            other = await client.get(server.url, headers=headers)  # any non-card path
            assert other.status_code == 401
            preflight = await client.options(
                server.url, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
            )
            assert preflight.status_code == 401
            assert fake.calls == []

    run(main())


def test_a_body_over_the_cap_is_a_jsonrpc_error_and_never_decoded():
    async def main():
        async with serving() as (server, fake), http() as client:
            big = rpc("SendMessage", {"message": text_message("x" * BODY_LIMIT)})
            raw = json.dumps(big).encode()
            assert len(raw) > BODY_LIMIT
            response = await client.post(
                server.url, content=raw, headers={**ALICE_AUTH, "Content-Type": "application/json"}
            )
            assert response.status_code == 200
            body = response.json()
            assert body["id"] is None and body["error"]["code"] == -32600
            assert "262144-byte limit" in body["error"]["message"]

            async def chunks():  # no Content-Length: the cap holds for a streamed body too
                for _ in range(40):
                    yield b"x" * 16384

            streamed = await client.post(server.url, content=chunks(), headers=ALICE_AUTH)
            assert streamed.status_code == 200 and error_of(streamed)["code"] == -32600
            assert fake.calls == []

            # under the cap, but over the 64 KiB text limit: invalid params, still before the service
            mid = await call(client, server.url, "SendMessage", {"message": text_message("y" * (100 * 1024))})
            assert error_of(mid)["code"] == -32602 and "65536-byte limit" in error_of(mid)["message"]
            assert fake.calls == []
            ok = await call(client, server.url, "SendMessage", {"message": text_message("small")})
            assert ok.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    run(main())


def test_a_smaller_configured_cap_applies():
    async def main():
        async with serving(body_limit=1024) as (server, fake), http() as client:
            response = await call(client, server.url, "SendMessage", {"message": text_message("z" * 2000)})
            assert error_of(response)["code"] == -32600 and fake.calls == []

    run(main())


def test_non_text_parts_are_unsupported_content_and_bad_metadata_invalid_params():
    async def main():
        async with serving() as (server, fake), http() as client:
            for message, needle, code in (
                ({**text_message(), "parts": [{"url": "https://example.com/a.png"}]}, "only text parts", -32005),
                ({**text_message(), "parts": [{"raw": "aGk="}]}, "only text parts", -32005),
                ({**text_message(), "metadata": {"crosstalk": {"kind": "shout"}}}, "metadata.crosstalk.kind", -32602),
                ({**text_message(), "metadata": {"crosstalk": "ask"}}, "must be an object", -32602),
            ):
                response = await call(client, server.url, "SendMessage", {"message": message}, rid="r-7")
                err = error_of(response)
                assert err["code"] == code and needle in err["message"], err
                assert response.json()["id"] == "r-7"
            assert fake.calls == []

    run(main())


def test_task_errors_map_to_their_jsonrpc_codes():
    async def main():
        fake = FakeTasks()
        async with serving(fake) as (server, _), http() as client:
            done = (await call(client, server.url, "SendMessage", {"message": text_message()})).json()["result"]["task"]
            codes = {}
            codes["not_found"] = error_of(await call(client, server.url, "GetTask", {"id": "task-9999"}))
            codes["not_found_other"] = error_of(
                await call(client, server.url, "GetTask", {"id": done["id"]}, headers=BOB_AUTH)
            )
            codes["not_cancelable"] = error_of(await call(client, server.url, "CancelTask", {"id": done["id"]}))
            codes["unsupported"] = error_of(
                await call(
                    client, server.url, "SendMessage", {"message": text_message("again", "m-2", taskId=done["id"])}
                )
            )
            fake.invalid_reason = "admission: 256 pending tasks"
            codes["invalid"] = error_of(
                await call(client, server.url, "SendMessage", {"message": text_message("x", "m-3")})
            )
            assert {k: v["code"] for k, v in codes.items()} == {
                "not_found": -32001,
                "not_found_other": -32001,
                "not_cancelable": -32002,
                "unsupported": -32004,
                "invalid": -32600,
            }
            assert codes["invalid"]["message"] == "admission: 256 pending tasks"
            assert codes["not_found"]["data"][0]["reason"] == "TASK_NOT_FOUND"

    run(main())


def test_streaming_push_and_extended_card_get_the_mandated_errors():
    async def main():
        async with serving() as (server, fake), http() as client:
            for method, params, code in (
                ("SendStreamingMessage", {"message": text_message()}, -32004),
                ("SubscribeToTask", {"id": "task-0001"}, -32004),
                ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://example.com/hook"}, -32003),
                ("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}, -32003),
                ("ListTaskPushNotificationConfigs", {"taskId": "t"}, -32003),
                ("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}, -32003),
                ("GetExtendedAgentCard", {}, -32004),
            ):
                response = await call(client, server.url, method, params)
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("application/json"), method  # not an SSE stream
                assert error_of(response)["code"] == code, method
            assert error_of(await call(client, server.url, "NoSuchMethod"))["code"] == -32601
            assert fake.calls == []

    run(main())


def test_the_a2a_version_header_is_required_and_may_come_as_a_query_parameter():
    async def main():
        async with serving() as (server, fake), http() as client:
            bare = {"Authorization": "Bearer tok-alice"}
            response = await call(client, server.url, "GetTask", {"id": "task-0001"}, headers=bare)
            assert error_of(response)["code"] == -32009  # no header means 0.3, which this agent does not speak
            old = await call(client, server.url, "GetTask", {"id": "task-0001"}, headers={**bare, "A2A-Version": "0.3"})
            assert error_of(old)["code"] == -32009
            assert fake.calls == []
            query = await client.post(
                server.url + "?A2A-Version=1.0", json=rpc("SendMessage", {"message": text_message()}), headers=bare
            )
            assert query.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    run(main())


def test_malformed_json_is_a_parse_error():
    async def main():
        async with serving() as (server, fake), http() as client:
            response = await client.post(server.url, content=b"{not json", headers=ALICE_AUTH)
            assert error_of(response)["code"] == -32700 and fake.calls == []

    run(main())


def test_an_a2a_0_3_client_is_served_too_as_gemini_cli_calls_a_remote_agent():
    """Gemini CLI 0.61.0 (its @a2a-js/sdk client) sends A2A 0.3 JSON-RPC: `message/send` with 0.3 parts and no
    A2A-Version header. The same gate names the sender by its bearer token; the answer is a 0.3 task."""

    async def main():
        async with serving() as (server, fake), http() as client:
            message = {"kind": "message", "role": "user", "messageId": "m-03-1",
                       "parts": [{"kind": "text", "text": "hello from gemini"}]}  # fmt: skip
            params = {"message": message, "configuration": {"blocking": True}}
            bare = {"Authorization": ALICE_AUTH["Authorization"]}
            refused = await call(client, server.url, "message/send", params, headers={"Authorization": "Bearer no"})
            assert refused.status_code == 401 and fake.calls == []
            answer = (await call(client, server.url, "message/send", params, headers=bare)).json()["result"]
            assert answer["kind"] == "task" and answer["status"]["state"] == "completed", answer
            assert answer["history"][0]["parts"] == [{"kind": "text", "text": "hello from gemini"}]
            [sent] = fake.calls
            assert sent[:3] == ("send", "a1a1a1a1a1a1a1a1", "m-03-1")  # sent by alice, the bearer's agent
            got = (await call(client, server.url, "tasks/get", {"id": answer["id"]}, headers=bare)).json()["result"]
            assert got["id"] == answer["id"] and got["status"]["state"] == "completed"

    run(main())
