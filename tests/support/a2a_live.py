"""A real A2AServer on 127.0.0.1:0 in the test's event loop, over the in-memory FakeTasks, and clients for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from a2a.client import ClientCallContext

from crosstalk.ingress.a2a.server import A2AServer
from tests.support.a2a_agents import sdk
from tests.support.a2a_fake_tasks import FakeTasks, authenticate
from tests.support.bounded import run_bounded

WAIT_S = 30.0
V1 = {"A2A-Version": "1.0"}
ALICE_AUTH = {"Authorization": "Bearer tok-alice", **V1}
BOB_AUTH = {"Authorization": "Bearer tok-bob", **V1}


def run(coro: Any, timeout: float = WAIT_S) -> Any:
    return run_bounded(coro, timeout)


@asynccontextmanager
async def serving(fake: FakeTasks | None = None, **kw: Any) -> AsyncIterator[tuple[A2AServer, FakeTasks]]:
    fake = fake or FakeTasks()
    server = A2AServer(
        name="bob", description="Bob's live coding session", tasks=fake, authenticate=authenticate, to="bob", **kw
    )
    await server.start()
    try:
        yield server, fake
    finally:
        await asyncio.wait_for(server.close(), 15)


@asynccontextmanager
async def sdk_client(url: str, token: str | None = "tok-alice") -> AsyncIterator[tuple[Any, ClientCallContext]]:
    """The official SDK client, from the resolved card, with the bearer token through its AuthInterceptor."""
    async with sdk(url, token, timeout=WAIT_S) as client:
        yield client.client, client.ctx


def rpc(method: str, params: dict[str, Any] | None = None, rid: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}


def text_message(text: str = "hello", message_id: str = "m-1", **extra: Any) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **extra}
