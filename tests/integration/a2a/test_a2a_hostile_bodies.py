"""Hostile JSON-RPC bodies over raw HTTP: one that nests too deeply is a parse error (-32700) naming the depth, never
an internal error; a lone surrogate in the message text is invalid params naming the field (the SDK's own protobuf
parse answers that one). The server keeps
serving after each, and nothing reaches the service."""

from __future__ import annotations

import json

import httpx

from tests.support.a2a_live import ALICE_AUTH, rpc, run, serving, text_message


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return body["error"]


def test_a_deeply_nested_body_is_a_parse_error_naming_the_depth():
    deep = "[" * 1000 + "]" * 1000
    raw = json.dumps(rpc("SendMessage", {"message": text_message()}))[:-1] + ', "x": ' + deep + "}"

    async def main():
        async with serving() as (server, fake), httpx.AsyncClient(timeout=30) as client:
            response = await client.post(server.url, content=raw.encode(), headers=ALICE_AUTH)
            assert response.status_code == 200
            err = error_of(response)
            assert err["code"] == -32700 and "nested deeper" in err["message"], err
            assert response.json()["id"] is None and fake.calls == []
            ok = await client.post(server.url, json=rpc("SendMessage", {"message": text_message()}), headers=ALICE_AUTH)
            assert ok.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    run(main())


def test_a_lone_surrogate_in_the_text_is_invalid_params_naming_the_field():
    raw = json.dumps(rpc("SendMessage", {"message": text_message("hi \ud800 there")}), ensure_ascii=True)
    assert "\\ud800" in raw

    async def main():
        async with serving() as (server, fake), httpx.AsyncClient(timeout=30) as client:
            response = await client.post(server.url, content=raw.encode(), headers=ALICE_AUTH)
            err = error_of(response)
            # the SDK's protobuf parse refuses it, naming the field in the error's data
            assert err["code"] == -32602 and "message.parts[0].text" in json.dumps(err), err
            assert "surrogate" in json.dumps(err) and fake.calls == []
            ok = await client.post(server.url, json=rpc("SendMessage", {"message": text_message()}), headers=ALICE_AUTH)
            assert ok.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    run(main())
