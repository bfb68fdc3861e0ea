"""LazyA2AServer (ingress/a2a/lazy.py): the port is bound at start and the SDK loads only on a first connection;
closed before any client, it loads nothing and frees the port."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import pytest

from crosstalk.ingress.a2a.lazy import LazyA2AServer

pytestmark = pytest.mark.unit

CHILD = """
import asyncio, json, sys
from crosstalk.core.tasks import TaskApi
from crosstalk.ingress.a2a.lazy import LazyA2AServer

def heavy():
    return sorted({m.split('.')[0] for m in sys.modules} & {'a2a', 'uvicorn', 'starlette', 'httpx', 'google'})

async def main():
    server = LazyA2AServer(name="bob", description="a test agent", tasks=TaskApi(), authenticate=lambda t: None,
                           to="bob")
    url = await server.start()
    before = heavy()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /.well-known/agent-card.json HTTP/1.1\\r\\nhost: x\\r\\nconnection: close\\r\\n\\r\\n")
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    after = heavy()
    await server.close()
    print(json.dumps([url, before, after, server.loaded, answer.split(b"\\r\\n")[0].decode(),
                      json.loads(answer.split(b"\\r\\n\\r\\n", 1)[1])["name"]]))

asyncio.run(main())
"""


def test_the_sdk_loads_on_the_first_connection_and_then_serves_the_card() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True)
    url, before, after, loaded, status, name = json.loads(out.stdout)
    assert url.startswith("http://127.0.0.1:")
    assert before == [] and {"a2a", "uvicorn", "starlette"} <= set(after)
    assert status == "HTTP/1.1 200 OK" and name == "bob"
    assert loaded is False  # closed: nothing serves it any more


def test_closed_before_any_client_it_frees_the_port() -> None:
    async def main() -> int:
        server = LazyA2AServer(name="bob", description="d", tasks=None, authenticate=lambda t: None, to="bob")
        await server.start()
        port = server.port
        assert port and server.url == f"http://127.0.0.1:{port}/" and not server.loaded
        server.rename("bobby")
        await server.close()
        await server.close()  # idempotent
        return port

    port = asyncio.run(main())
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def test_a_path_in_the_card_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="filesystem path"):
        LazyA2AServer(
            name="bob",
            description=f"runs in {__file__.rsplit('/', 1)[0]}",
            tasks=None,
            authenticate=lambda t: None,
            to="bob",
        )
