"""Helpers for the shim tool tests: in-process routers over real fake-harness agents on loopback, each test in a
short private state root (AF_UNIX paths must stay short)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from crosstalk.core.sender import Sender
from crosstalk.receiver import Inbound
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.router import CallContext
from crosstalk.shim.tools import ShimRouter
from tests.support.bounded import run_bounded
from tests.support.waiting import until_async

T = TypeVar("T")
TEST_S = 60.0
WAIT_S = 10.0


def run(coro_fn: Callable[[Path], Coroutine[Any, Any, T]], timeout: float = TEST_S) -> T:
    root = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
    try:
        return run_bounded(lambda: coro_fn(root), timeout, what=getattr(coro_fn, "__qualname__", None))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def router(root: Path, *, answer: str | None = None) -> ShimRouter:
    env = {"CROSSTALK_FAKE_INBOX_DIR": str(root / "inbox"), "CLAUDE_CONFIG_DIR": str(root / "claude")}
    if answer is not None:
        env["CROSSTALK_FAKE_ANSWER"] = answer
    (root / "inbox").mkdir(exist_ok=True)
    return ShimRouter("fake", StatePaths(root / "st"), environ=env, cwd=str(root))


def ctx(session: str | None, name: str | None = None) -> CallContext:
    meta: dict[str, Any] = {}
    if session is not None:
        meta["crosstalk/session"] = session
    if name is not None:
        meta["crosstalk/name"] = name
    return CallContext(meta=meta)


async def call(r: ShimRouter, tool: str, c: CallContext, **args: Any) -> tuple[dict[str, Any], bool]:
    res = await asyncio.wait_for(r.call(tool, args, c), WAIT_S)
    json.dumps(res.data)  # compact JSON a model can read: always serializable
    return dict(res.data), res.is_error


def inbox(root: Path, name: str) -> list[dict[str, Any]]:
    path = root / "inbox" / f"{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


until = until_async  # poll, yielding to the loop (tests/support/waiting.py): the shim tests' name for it

ALICE = ctx("s-alice", "alice")
BOB = ctx("s-bob", "bob")


async def receive_at(host: Any, msg: Any, sender: Sender) -> str:
    """Run a message through the agent's receiver chain as the uds ingress does after authenticating it."""
    out = await asyncio.wait_for(host.receiver.receive(Inbound(msg, sender, "uds")), WAIT_S)
    return out.state.value


def run_with_bob(body: Callable[[Path, ShimRouter, ShimRouter], Coroutine[Any, Any, None]]) -> None:
    """Run `body(root, a, b)` over two in-process routers with bob bound on `b`, closing both after."""

    async def main(root: Path) -> None:
        async with alice_and_bob(root) as (a, b):
            await body(root, a, b)

    run(main)


@contextlib.asynccontextmanager
async def alice_and_bob(root: Path) -> AsyncIterator[tuple[ShimRouter, ShimRouter]]:
    """alice's shim and bob's on one state root, bob bound (registered, its socket serving); both closed after."""
    a, b = router(root), router(root)
    try:
        await call(b, "list_agents", BOB)
        yield a, b
    finally:
        await a.close()
        await b.close()
