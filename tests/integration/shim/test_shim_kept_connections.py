"""A shim keeps one task-frame connection per peer agent (ingress/uds_kept.py, served by uds_tasks.serve_kept):
many sends on one connection and one auth, a peer restarted by kill -9 reached again transparently, a connection
lost after the peer took a frame retried once and delivered once (the peer's dedupe), and every kept connection
closed when the shim closes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crosstalk.ingress import uds_tasks
from crosstalk.journal.codec import read_journal
from tests.support.shim_tools import ALICE, alice_and_bob, call, inbox, router, run, until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
BOB_PROCESS = """
import asyncio, sys
from pathlib import Path
from tests.support.shim_tools import BOB, call, router

async def main():
    b = router(Path(sys.argv[1]))
    await call(b, "list_agents", BOB)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await b.close()

asyncio.run(main())
"""


async def start_bob(root: Path) -> asyncio.subprocess.Process:
    """bob's shim in a process of its own, bound, serving its socket."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", BOB_PROCESS, str(root), cwd=str(REPO), env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert line.strip() == b"ready", line
    return proc


async def kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGKILL)
    await asyncio.wait_for(proc.wait(), 10)


def delivered(root: Path, mid: str) -> int:
    return len([x for x in inbox(root, "bob") if x["message_id"] == mid])


def test_sends_share_a_kept_connection_and_a_peer_killed_and_restarted_is_reached_again():
    async def main(root: Path) -> None:
        a = router(root)
        bob = await start_bob(root)
        try:
            mids = []
            for i in range(3):
                out, err = await call(a, "send_message", ALICE, to="bob", text=f"kept {i}")
                assert not err and out["state"] == "accepted", out
                mids.append(out["message_id"])
            [(_instances, _where, client)] = a.sender._uds.values()
            assert client.connections.opened == 1 and client.connections.idle == 1

            await kill(bob)  # kill -9: the kept connection ends without a word
            bob = await start_bob(root)
            out, err = await call(a, "send_message", ALICE, to="bob", text="after the restart")
            assert not err and out["state"] == "accepted", out
            mids.append(out["message_id"])
            assert [delivered(root, mid) for mid in mids] == [1, 1, 1, 1]
        finally:
            await a.close()
            await kill(bob)

    run(main)


def test_a_connection_lost_after_the_peer_took_the_frame_ends_in_one_delivery(monkeypatch: pytest.MonkeyPatch):
    served = uds_tasks.serve_task
    frames: list[str] = []

    async def second_frame_lost(desk: Any, line: Any, pid: int, to: str, **kw: Any) -> bytes:
        answer = await served(desk, line, pid, to, **kw)
        frames.append(str(line.params.get("message", {}).get("message_id")))
        if len(frames) == 2:  # the first frame on the kept connection: journaled, delivered, then unanswered
            raise ConnectionResetError("the connection went away before the answer")
        return answer

    monkeypatch.setattr(uds_tasks, "serve_task", second_frame_lost)

    async def main(root: Path) -> None:
        async with alice_and_bob(root) as (a, b):
            first, _ = await call(a, "send_message", ALICE, to="bob", text="opens the connection")
            assert first["state"] == "accepted", first
            # The next frame is taken in and delivered, then its answer is lost with the connection: the shim sends
            # the same frame again on a fresh connection, and bob's dedupe answers it from the first copy.
            out, err = await call(a, "send_message", ALICE, to="bob", text="sent once")
            assert not err and out["state"] == "accepted", out
            assert frames == [first["message_id"], out["message_id"], out["message_id"]]
            [(_instances, _where, client)] = a.sender._uds.values()
            assert client.connections.opened == 2
            assert delivered(root, out["message_id"]) == 1
            host = b.pool.hosts()[0]
            records = read_journal(host.paths.journal_file(host.agent_id)).records
            got = [r for r in records if r["type"] == "received" and r["message"]["message_id"] == out["message_id"]]
            assert len(got) == 1

    run(main)


def test_the_shim_closes_its_kept_connections_when_it_closes():
    async def main(root: Path) -> None:
        async with alice_and_bob(root) as (a, b):
            out, _ = await call(a, "send_message", ALICE, to="bob", text="one")
            assert out["state"] == "accepted", out
            bob = b.pool.hosts()[0]
            handlers = bob._ingress._handlers
            assert len(handlers) == 1  # the kept connection, served between frames
            await a.close()
            await until(lambda: not handlers, "bob's side of the kept connection closed")

    run(main)
