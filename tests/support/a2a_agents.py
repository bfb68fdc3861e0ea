"""Real crosstalk agents serving A2A, for the agent-to-agent integration tests.

Every agent is a real AgentHost (journal, receiver chain, task service, uds ingress, A2A server on 127.0.0.1:0)
with a FakeHarness writing to an inbox file, run in the test's own event loop. Several agents share one short
state root, so the token of one (its 0600 credential file) is a verified sender at another's A2A URL.

Clients: the official a2a-sdk client (A2ACardResolver + ClientFactory + AuthInterceptor, the way any A2A client
would reach an agent) and raw JSON-RPC over httpx for the wire-level checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from a2a.client import (
    A2ACardResolver,
    AuthInterceptor,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
    InMemoryContextCredentialStore,
)
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict, ParseDict

from crosstalk.agent import AgentConfig, AgentHost
from crosstalk.harness.fake import FakeHarness
from crosstalk.journal.codec import read_journal
from crosstalk.journal.records import message_id_of
from crosstalk.policy import Limits, Role
from crosstalk.registry.credentials import read_key
from crosstalk.registry.paths import StatePaths
from tests.support import waiting
from tests.support.bounded import run_bounded

T = TypeVar("T")

WAIT_S = 20.0  # every single wait in these tests is bounded by this
TEST_S = 90.0  # a whole test's event loop is bounded by this
V1 = {"A2A-Version": "1.0"}


def make_root() -> Path:
    """A short private state root: AF_UNIX socket paths under it must fit in 107 bytes."""
    return Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))


def rm_root(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def run(coro_fn: Callable[[Path], Coroutine[Any, Any, T]], timeout: float = TEST_S) -> T:
    """Run `coro_fn(root)` in a fresh event loop with a fresh state root; the root is removed afterwards."""
    root = make_root()
    try:
        return run_bounded(lambda: coro_fn(root), timeout, what=getattr(coro_fn, "__qualname__", None))
    finally:
        rm_root(root)


async def until(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll (yielding to the loop) until predicate() holds (tests/support/waiting.py), bounded by these tests'
    WAIT_S."""
    await waiting.until_async(predicate, what, timeout)


async def until_async(predicate: Callable[[], Awaitable[bool]], what: str, timeout: float = WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        if loop.time() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.02)


# ---------------------------------------------------------------------- agents


@dataclass
class Agent:
    """One running agent and what a test needs of it."""

    root: Path
    name: str
    session_ref: str
    fake: FakeHarness
    host: AgentHost
    inbox: Path
    config: AgentConfig
    closed: bool = field(default=False)

    @property
    def paths(self) -> StatePaths:
        return self.host.paths

    @property
    def agent_id(self) -> str:
        return self.host.agent_id

    @property
    def url(self) -> str:
        assert self.host.a2a_url
        return self.host.a2a_url

    @property
    def token(self) -> str:
        """This agent's own bearer token: presented at another agent's URL it names this agent as the sender."""
        return read_key(self.paths.token_path(self.agent_id))

    @property
    def tasks(self) -> Any:
        return self.host.tasks

    def writes(self) -> list[dict[str, Any]]:
        """Every write the fake harness made into the "session" (in memory)."""
        return list(self.fake.writes)

    def write_ids(self) -> list[str]:
        return [w["message_id"] for w in self.fake.writes]

    def inbox_lines(self) -> list[dict[str, Any]]:
        if not self.inbox.exists():
            return []
        return [json.loads(x) for x in self.inbox.read_text().splitlines() if x.strip()]

    def inbox_ids(self) -> list[str]:
        return [line["message_id"] for line in self.inbox_lines()]

    async def records(self) -> list[dict[str, Any]]:
        """The journal as written so far (a barrier first: every batch submitted before is on disk)."""
        if not self.closed:
            await asyncio.wrap_future(self.host.journal.submit([], durable=False))
        return read_journal(self.paths.journal_file(self.agent_id)).records

    def records_now(self) -> list[dict[str, Any]]:
        return read_journal(self.paths.journal_file(self.agent_id)).records

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await asyncio.wait_for(self.host.close(), WAIT_S)


async def start_agent(
    root: Path,
    name: str,
    *,
    session_ref: str | None = None,
    script: list[str] | None = None,
    default: str = "accept",
    answer: str | None = None,
    limits: Limits | None = None,
    role: Role = Role.PRIMARY,
    owner: str | None = None,
    accept_from: tuple[str, ...] | None = None,
    inject_timeout_s: float = 10.0,
) -> Agent:
    """Start an agent serving A2A in the running loop (same state root → same session restarts the agent)."""
    session_ref = session_ref or f"sess-{name}"
    inbox = root / f"{name}.inbox.jsonl"
    fake = FakeHarness(script, default=default, inbox=inbox, answer=answer)
    config = AgentConfig(
        harness=fake,
        session_ref=session_ref,
        preferred_name=name,
        cwd=str(root),
        role=role,
        owner=owner,
        accept_from=accept_from,
        limits=limits or Limits(),
        inject_timeout_s=inject_timeout_s,
        a2a=True,
    )
    host = await asyncio.wait_for(AgentHost.start(StatePaths(root), config), WAIT_S)
    assert host.name == name, (host.name, name)
    return Agent(root, name, session_ref, fake, host, inbox, config)


@contextlib.asynccontextmanager
async def agents(root: Path, *names: str, **per_name: dict[str, Any]) -> AsyncIterator[dict[str, Agent]]:
    """Start each named agent (options from per_name[name]); close them all, in reverse, whatever happens."""
    started: dict[str, Agent] = {}
    try:
        for name in names:
            started[name] = await start_agent(root, name, **per_name.get(name, {}))
        yield started
    finally:
        for agent in reversed(list(started.values())):
            with contextlib.suppress(Exception):
                agent.fake.release()  # a blocked injection must not hold the close up
            with contextlib.suppress(Exception):
                await agent.close()


# ---------------------------------------------------------------------- the official SDK client


@dataclass
class Sdk:
    """The SDK client for one (sender token, receiver URL) pair, with its call context."""

    client: Any
    ctx: ClientCallContext
    card: pb.AgentCard

    async def send(self, request: pb.SendMessageRequest, timeout: float = WAIT_S) -> pb.StreamResponse:
        async def go() -> pb.StreamResponse:
            events = [event async for event in self.client.send_message(request, context=self.ctx)]
            assert len(events) == 1, events
            return events[0]

        return await asyncio.wait_for(go(), timeout)

    async def send_task(self, request: pb.SendMessageRequest, timeout: float = WAIT_S) -> pb.Task:
        event = await self.send(request, timeout)
        assert event.HasField("task"), MessageToDict(event)
        return event.task

    async def get(self, task_id: str) -> pb.Task:
        return await asyncio.wait_for(self.client.get_task(pb.GetTaskRequest(id=task_id), context=self.ctx), WAIT_S)

    async def cancel(self, task_id: str) -> pb.Task:
        return await asyncio.wait_for(
            self.client.cancel_task(pb.CancelTaskRequest(id=task_id), context=self.ctx), WAIT_S
        )

    async def list(self, **kw: Any) -> pb.ListTasksResponse:
        return await asyncio.wait_for(self.client.list_tasks(pb.ListTasksRequest(**kw), context=self.ctx), WAIT_S)

    async def wait_delivered(self, task_id: str, timeout: float = WAIT_S) -> pb.Task:
        """The task once its first message's dispatch has settled (metadata.crosstalk.delivery is set). A task
        reads as working from the dispatch claim on, before the harness answers, so `working` alone is not it."""
        last: list[pb.Task] = []

        async def settled() -> bool:
            last[:] = [await self.get(task_id)]
            return "delivery" in ct_meta(last[0])

        await until_async(settled, f"task {task_id} dispatched", timeout)
        return last[0]

    async def wait_state(self, task_id: str, *states: int, timeout: float = WAIT_S) -> pb.Task:
        last: list[pb.Task] = []

        async def reached() -> bool:
            last[:] = [await self.get(task_id)]
            return last[0].status.state in states

        await until_async(reached, f"task {task_id} in {states}", timeout)
        return last[0]


@contextlib.asynccontextmanager
async def sdk(url: str, token: str | None, *, timeout: float = WAIT_S) -> AsyncIterator[Sdk]:
    """The official client from the card the SDK resolver fetched, the bearer token through its AuthInterceptor."""
    async with httpx.AsyncClient(timeout=timeout) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        creds = InMemoryContextCredentialStore()
        if token is not None:
            await creds.set_credentials("xt-session", "bearer", token)
        ctx = ClientCallContext(state={"sessionId": "xt-session"})
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(
            card, interceptors=[AuthInterceptor(creds)]
        )
        try:
            yield Sdk(client, ctx, card)
        finally:
            await client.close()


@contextlib.asynccontextmanager
async def alice_to_bob(root: Path, **bob: Any) -> AsyncIterator[tuple[Agent, Agent, Sdk]]:
    """Agents alice and bob (bob started with the `start_agent` options given), and the SDK client presenting
    alice's token to bob: the usual two-agent set-up."""
    async with agents(root, "alice", "bob", bob=bob) as ag:
        alice, bob = ag["alice"], ag["bob"]
        async with sdk(bob.url, alice.token) as client:
            yield alice, bob, client


def send_request(
    text: str = "hello",
    *,
    message_id: str,
    metadata: dict[str, Any] | None = None,
    task_id: str = "",
    **config: Any,
) -> pb.SendMessageRequest:
    """A SendMessage request as an A2A client builds it (camelCase configuration keys)."""
    message: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    if metadata is not None:
        message["metadata"] = metadata
    if task_id:
        message["taskId"] = task_id
    return ParseDict({"message": message, "configuration": config}, pb.SendMessageRequest())


def ct_meta(task: pb.Task) -> dict[str, Any]:
    """metadata.crosstalk of a task."""
    return MessageToDict(task.metadata).get("crosstalk", {})


def history_roles(task: pb.Task) -> list[tuple[str, str]]:
    return [(pb.Role.Name(m.role), "\n".join(p.text for p in m.parts)) for m in task.history]


# ---------------------------------------------------------------------- raw JSON-RPC


def rpc_body(method: str, params: dict[str, Any] | None = None, rid: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}


def text_message(text: str, message_id: str, **extra: Any) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **extra}


async def rpc(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any] | None = None, *, token: str | None
) -> httpx.Response:
    headers = dict(V1)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return await http.post(url, json=rpc_body(method, params), headers=headers)


BEARER_TTL_S = 2.0  # registry/bearer.py caches a token's liveness this long: a stopped agent's token lapses within it


async def until_token_refused(url: str, token: str, timeout: float = BEARER_TTL_S + 8.0) -> None:
    """Probe with GetTask (which injects nothing) until the agent at `url` refuses `token` with 401."""
    async with httpx.AsyncClient(timeout=WAIT_S) as http:

        async def refused() -> bool:
            return (await rpc(http, url, "GetTask", {"id": "probe"}, token=token)).status_code == 401

        await until_async(refused, "the stopped agent's token refused", timeout)


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert body.get("jsonrpc") == "2.0" and "result" not in body and "error" in body, body
    return body["error"]


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "error" not in body, body
    return body["result"]


# ---------------------------------------------------------------------- journal views


def received_ids(records: list[dict[str, Any]]) -> list[str]:
    return [r["message"]["message_id"] for r in records if r.get("type") == "received"]


def of_type(records: list[dict[str, Any]], rtype: str, message_id: str | None = None) -> list[dict[str, Any]]:
    return [r for r in records if r.get("type") == rtype and (message_id is None or message_id_of(r) == message_id)]


def task_records(records: list[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    return [r for r in records if r.get("type") == "task" and r.get("task_id") == task_id]
