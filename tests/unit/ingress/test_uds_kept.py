"""Kept task-frame connections (ingress/uds_kept.py, uds_task_client.py's `keep`), against a scripted peer socket:
one connection and one auth line for many frames, each answer the answer to its frame, a connection the peer did
not keep (or dropped) never reused, one retry on a fresh connection when a kept one breaks mid-send, bounded by
MAX_KEPT, closed when idle and at close()."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.message import new_message
from crosstalk.ingress import uds_kept
from crosstalk.ingress.errors import A2AOutcomeUnknown
from crosstalk.ingress.uds_task_client import UdsTaskClient
from tests.support.bounded import run_bounded
from tests.support.waiting import until_async as until

pytestmark = pytest.mark.unit

TEST_S = 20.0
# What the scripted peer does with frame n (counted over all connections): answer, answer without keeping,
# take it and drop the connection unanswered, or never answer.
Script = Callable[[int, dict[str, Any]], Awaitable[str]]


class Peer:
    """A unix socket answering task frames the way uds_tasks.serve_kept does, as `script` says."""

    def __init__(self, path: str, script: Script | None = None) -> None:
        self.path = path
        self.script = script
        self.frames: list[dict[str, Any]] = []
        self.auths = 0
        self.connections = 0
        self.open = 0
        self.server: asyncio.Server | None = None
        self.handlers: set[asyncio.Task[Any]] = set()

    async def start(self) -> Peer:
        self.server = await asyncio.start_unix_server(self._serve, self.path)
        return self

    async def stop(self) -> None:
        """Stop listening and drop every connection (a restart, as the client sees it)."""
        assert self.server is not None
        self.server.close()
        for task in self.handlers:
            task.cancel()
        await until(lambda: self.open == 0, "the peer's handlers gone")
        await asyncio.wait_for(self.server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            auth = json.loads(await reader.readline())
            assert auth["type"] == "auth"
            self.auths += 1
            while raw := await reader.readline():
                frame = json.loads(raw)
                self.frames.append(frame)
                what = await self.script(len(self.frames), frame) if self.script else "answer"
                if what == "drop":
                    return
                if what == "silent":
                    await asyncio.sleep(TEST_S)
                mid = frame.get("message", {}).get("message_id") or frame.get("task_id")
                task = {"task_id": f"t-{mid}", "state": "completed", "delivery": "accepted", "history": []}
                answer: dict[str, Any] = {"task": task}
                if frame.get("keep") and what != "close":
                    answer["kept"] = True
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
                if "kept" not in answer:
                    return
        finally:
            self.open -= 1
            writer.close()


def run(body: Callable[[str], Awaitable[None]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="xk", dir="/tmp"))
    try:
        run_bounded(body(str(root / "p.sock")), TEST_S)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_pair(
    body: Callable[[Peer, UdsTaskClient], Awaitable[None]], script: Script | None = None, **client: Any
) -> None:
    """A scripted peer and a client on it that keeps its connections (unless `keep=False`), then `body(peer,
    client)`; the client closed and the peer stopped after."""

    async def main(path: str) -> None:
        peer = await Peer(path, script).start()
        kept = UdsTaskClient(path, "key", "tok", **{"keep": True, **client})
        try:
            await body(peer, kept)
        finally:
            await kept.close()
            await peer.stop()

    run(main)


def test_many_frames_one_connection_one_auth_and_each_answer_is_its_frames() -> None:
    async def body(peer: Peer, client: UdsTaskClient) -> None:
        msgs = [new_message("bob", f"m{i}") for i in range(5)]
        views = [await client.send(m) for m in msgs]
        assert [v.task_id for v in views] == [f"t-{m.message_id}" for m in msgs]
        assert (peer.connections, peer.auths, client.connections.opened) == (1, 1, 1)
        assert all(f["keep"] is True for f in peer.frames)
        got = await client.get("t-x")
        assert got.task_id == "t-t-x" and peer.connections == 1
        assert client.connections.idle == 1
        await client.close()
        await until(lambda: peer.open == 0, "the kept connection closed at close()")

    run_pair(body)


def test_without_keep_every_request_has_its_own_connection() -> None:
    async def body(peer: Peer, client: UdsTaskClient) -> None:
        for i in range(3):
            await client.send(new_message("bob", f"m{i}"))
        assert peer.connections == peer.auths == 3 and "keep" not in peer.frames[0]
        assert client.connections.idle == 0

    run_pair(body, keep=False)


def test_a_peer_that_does_not_keep_the_connection_is_reconnected_each_time() -> None:
    async def close_after(n: int, frame: dict[str, Any]) -> str:
        return "close"  # an agent from before kept connections: no `kept`, EOF after the answer

    async def body(peer: Peer, client: UdsTaskClient) -> None:
        for i in range(3):
            await client.send(new_message("bob", f"m{i}"))
        assert peer.connections == 3 and client.connections.idle == 0

    run_pair(body, close_after)


def test_a_kept_connection_dropped_mid_send_is_retried_once_on_a_fresh_one() -> None:
    async def drop_second(n: int, frame: dict[str, Any]) -> str:
        return "drop" if n == 2 else "answer"  # the peer took frame 2, then went away without answering

    async def body(peer: Peer, client: UdsTaskClient) -> None:
        await client.send(new_message("bob", "first"))
        msg = new_message("bob", "second")
        view = await client.send(msg)
        assert view.task_id == f"t-{msg.message_id}"
        # The same frame twice, the same message_id: the real peer's dedupe makes it one delivery.
        assert [f["message"]["message_id"] for f in peer.frames[1:]] == [msg.message_id] * 2
        assert peer.connections == 2

    run_pair(body, drop_second)


def test_a_fresh_connection_that_breaks_mid_send_is_not_retried() -> None:
    async def drop_first(n: int, frame: dict[str, Any]) -> str:
        return "drop" if n == 1 else "answer"

    async def body(peer: Peer, client: UdsTaskClient) -> None:
        with pytest.raises(A2AOutcomeUnknown):
            await client.send(new_message("bob", "lost answer"))
        assert len(peer.frames) == 1 and client.connections.idle == 0

    run_pair(body, drop_first)


def test_a_connection_the_peer_closed_while_idle_is_not_used() -> None:
    async def body(path: str) -> None:
        peer = await Peer(path).start()
        client = UdsTaskClient(path, "key", "tok", keep=True)
        try:
            await client.send(new_message("bob", "one"))
            await peer.stop()  # the peer restarts: its connections close
            await until(lambda: not client.connections._idle[0].usable(), "the EOF seen")
            peer2 = await Peer(path).start()
            await client.send(new_message("bob", "two"))
            assert len(peer2.frames) == 1 and peer2.connections == 1
            await peer2.stop()
        finally:
            await client.close()

    run(body)


def test_an_unanswered_frame_times_out_and_its_connection_is_not_kept() -> None:
    async def silent(n: int, frame: dict[str, Any]) -> str:
        return "silent" if n == 2 else "answer"

    async def body(peer: Peer, client: UdsTaskClient) -> None:
        await client.send(new_message("bob", "one"))
        with pytest.raises(A2AOutcomeUnknown):
            await client.send(new_message("bob", "two"))
        assert client.connections.idle == 0
        await client.send(new_message("bob", "three"))  # a new connection: no stale answer can be read
        assert peer.connections == 2

    run_pair(body, silent, timeout=0.3)


def test_at_most_max_kept_connections_and_idle_ones_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uds_kept, "IDLE_S", 0.2)
    gate = asyncio.Event()

    async def held(n: int, frame: dict[str, Any]) -> str:
        await asyncio.wait_for(gate.wait(), TEST_S)
        return "answer"

    async def body(peer: Peer, client: UdsTaskClient) -> None:
        n = uds_kept.MAX_KEPT + 2
        sends = [asyncio.ensure_future(client.send(new_message("bob", f"m{i}"))) for i in range(n)]
        await until(lambda: len(peer.frames) == n, "every frame at the peer")
        assert sum(1 for f in peer.frames if f.get("keep")) == n  # every frame asks; only MAX_KEPT are kept
        gate.set()
        await asyncio.wait_for(asyncio.gather(*sends), 5)
        assert client.connections.idle == uds_kept.MAX_KEPT
        await until(lambda: client.connections.idle == 0, "idle connections closed")
        await until(lambda: peer.open == 0, "the peer saw them close")
        await client.send(new_message("bob", "after"))  # and a later send opens a new one
        assert peer.connections == n + 1

    run_pair(body, held)
