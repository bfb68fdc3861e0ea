"""The A2A edge against malformed and slow requests: a body that is not UTF-8 is a parse error, and a body that
never arrives in full (a false Content-Length) is answered and its connection closed within a bounded time."""

from __future__ import annotations

import asyncio
import contextlib
import time
from urllib.parse import urlsplit

import httpx
import pytest
from xt_a2a_agents import V1, WAIT_S, agents, error_of, run

from crosstalk.ingress.a2a import gate as gate_mod

pytestmark = pytest.mark.integration

SEND = (
    b'{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":'
    b'{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"bad: XX"}]}}}'
)


@pytest.mark.parametrize("bad", [b"\xff", b"\xed\xa0\x80", b"\xc3("])
def test_a_body_that_is_not_utf8_is_a_parse_error_and_injects_nothing(bad):
    async def main(root):
        async with agents(root, "alice", "bob") as ag, httpx.AsyncClient(timeout=WAIT_S) as http:
            alice, bob = ag["alice"], ag["bob"]
            headers = {**V1, "Authorization": f"Bearer {alice.token}", "Content-Type": "application/json"}
            response = await http.post(bob.url, content=SEND.replace(b"XX", bad), headers=headers)
            assert response.status_code == 200
            err = error_of(response)
            assert err["code"] == -32700 and "UTF-8" in err["message"], err
            assert bob.writes() == []

    run(main)


async def _hold_open(url: str, token: str | None, declared: int, sent: bytes) -> tuple[bytes, float]:
    """Send headers claiming `declared` body bytes, send only `sent`, then wait: return what came back by EOF."""
    parts = urlsplit(url)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port), WAIT_S)
    try:
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        head = (
            f"POST / HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
            f"{auth}Content-Length: {declared}\r\n\r\n"
        )
        t0 = time.monotonic()
        writer.write(head.encode() + sent)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), WAIT_S)  # until EOF: the server must close it
        return data, time.monotonic() - t0
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 2)


@pytest.mark.parametrize("authed", [True, False])
def test_a_false_content_length_is_answered_and_closed_within_the_body_timeout(monkeypatch, authed):
    monkeypatch.setattr(gate_mod, "BODY_TIMEOUT_S", 0.5)

    async def main(root):
        async with agents(root, "alice", "bob") as ag:
            alice, bob = ag["alice"], ag["bob"]
            data, took = await _hold_open(bob.url, alice.token if authed else None, 1000, b'{"jsonrpc":')
            assert data.startswith(b"HTTP/1.1 408"), data[:200]
            assert b"did not arrive in full" in data
            assert 0.4 <= took < 5.0
            assert bob.writes() == []
            # The server still serves everyone else.
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                card = await http.get(bob.url.rstrip("/") + "/.well-known/agent-card.json")
                assert card.status_code == 200

    run(main)
