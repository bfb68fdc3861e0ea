"""A peer's socket at its connection cap (ingress/uds.py MAX_CONNECTIONS, made 4 here) sheds its longest-idle KEPT
connection (uds_keeping.IdleKept) to admit a new sender, never one with a frame in flight; the sender whose kept
connection was shed sends its next message on a fresh connection, without an error, delivered exactly once. Real
agents on real unix sockets, in one process (tests/support/shim_tools.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.message import new_message
from crosstalk.ingress import uds as uds_mod
from crosstalk.ingress import uds_kept, uds_tasks
from crosstalk.ingress.uds_client import deliver
from crosstalk.ingress.uds_task_client import UdsTaskClient
from crosstalk.shim.tools import ShimRouter
from tests.support.shim_tools import ALICE, WAIT_S, alice_and_bob, call, inbox, run, until

pytestmark = pytest.mark.integration

CAP = 4


def delivered(root: Path, mid: str) -> int:
    return len([x for x in inbox(root, "bob") if x["message_id"] == mid])


def kept_conn(client: UdsTaskClient) -> uds_kept.Conn:
    [conn] = client.connections._idle
    return conn


async def new_sender(where: tuple[str, str, str], text: str) -> Any:
    """A sender that has no connection yet (`crosstalk send`'s way: one connection, the key, one frame), in a
    thread: its blocking socket must not hold up the loop that serves bob."""
    path, key, _token = where
    return await asyncio.to_thread(deliver, path, key, new_message("bob", text, from_="@ci:test"), timeout=WAIT_S)


@dataclass
class AtCap:
    """bob's socket at its cap of idle kept connections: alice's shim's own, opened first, then `others` (clients
    with alice's token), in that order."""

    root: Path
    a: ShimRouter
    where: tuple[str, str, str]  # bob's socket, its key, alice's token
    alice: UdsTaskClient
    others: list[UdsTaskClient]
    ingress: Any  # bob's UdsIngress


def run_at_cap(cap: int, body: Callable[[AtCap], Awaitable[None]], monkeypatch: pytest.MonkeyPatch) -> None:
    """alice's and bob's shims in one process, bob's socket capped at `cap` and filled with idle kept connections;
    then `body`; every client and both shims closed after."""
    monkeypatch.setattr(uds_mod, "MAX_CONNECTIONS", cap)

    async def main(root: Path) -> None:
        async with alice_and_bob(root) as (a, b):
            out, err = await call(a, "send_message", ALICE, to="bob", text="opens alice's kept connection")
            assert not err and out["state"] == "accepted", out
            [(_instances, where, alice)] = a.sender._uds.values()
            others = [UdsTaskClient(*where, keep=True) for _ in range(cap - 1)]
            try:
                for i, other in enumerate(others):
                    view = await other.send(new_message("bob", f"fill {i}"))
                    assert view.delivery == "accepted", view
                ingress = b.pool.hosts()[0]._ingress
                await until(lambda: len(ingress._idle_kept) == cap, "bob's cap filled with idle kept connections")
                assert len(ingress._handlers) == cap
                await body(AtCap(root, a, where, alice, others, ingress))
            finally:
                for other in others:
                    await other.close()

    run(main)


def test_a_new_sender_gets_through_a_cap_of_idle_kept_ones_and_the_shed_one_reconnects_once(
    monkeypatch: pytest.MonkeyPatch,
):
    async def body(at: AtCap) -> None:
        # alice sends again on her kept connection: now others[0] has been idle longest, not the oldest (hers).
        out, err = await call(at.a, "send_message", ALICE, to="bob", text="alice again")
        assert not err and out["state"] == "accepted", out
        shed = kept_conn(at.others[0])

        outcome = await new_sender(at.where, "a new sender at the cap")
        assert outcome.state.value == "accepted", outcome
        assert delivered(at.root, outcome.message_id) == 1
        await until(lambda: not shed.usable(), "the longest-idle kept connection closed by bob")
        assert all(kept_conn(c).usable() for c in [at.alice, *at.others[1:]])  # nothing else was shed
        await until(lambda: len(at.ingress._handlers) == CAP - 1, "the new sender's and the shed handler gone")

        # The shed connection's owner: its next message on a fresh connection, no error, delivered once.
        again = new_message("bob", "after the shed")
        view = await at.others[0].send(again)
        assert view.delivery == "accepted", view
        assert at.others[0].connections.opened == 2
        assert delivered(at.root, again.message_id) == 1
        assert len(at.ingress._handlers) == CAP and len(at.ingress._shedding) == 0

    run_at_cap(CAP, body, monkeypatch)


def test_a_frame_written_on_a_connection_already_shed_is_sent_again_once(monkeypatch: pytest.MonkeyPatch):
    """The close reaches the sender after it wrote its next frame (the race `usable()` cannot see): the frame was
    never read by bob, the sender sends it once more on a fresh connection, and bob delivers it once."""

    async def body(at: AtCap) -> None:
        shed = kept_conn(at.alice)  # the longest idle: opened first, not used since
        outcome = await new_sender(at.where, "a new sender at the cap")
        assert outcome.state.value == "accepted", outcome
        await until(lambda: not shed.usable(), "alice's kept connection closed by bob")

        monkeypatch.setattr(uds_kept.Conn, "usable", lambda self: True)  # taken as if the close had not come
        out, err = await call(at.a, "send_message", ALICE, to="bob", text="written into the closed connection")
        assert not err and out["state"] == "accepted", out
        assert at.alice.connections.opened == 2
        assert delivered(at.root, out["message_id"]) == 1

    run_at_cap(CAP, body, monkeypatch)


def test_a_kept_connection_with_a_frame_in_flight_is_never_shed(monkeypatch: pytest.MonkeyPatch):
    served = uds_tasks.serve_task
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(desk: Any, line: Any, pid: int, to: str, **kw: Any) -> bytes:
        if "held" in str(line.params.get("message", {}).get("parts")):
            entered.set()
            await release.wait()
        return await served(desk, line, pid, to, **kw)

    monkeypatch.setattr(uds_tasks, "serve_task", held)

    async def body(at: AtCap) -> None:  # a cap of one: alice's kept connection
        sending = asyncio.create_task(call(at.a, "send_message", ALICE, to="bob", text="held in flight"))
        try:
            await asyncio.wait_for(entered.wait(), WAIT_S)
            outcome = await new_sender(at.where, "a new sender at the cap")
            assert outcome.state.value == "rejected" and outcome.reason.startswith("busy:"), outcome
        finally:
            release.set()
        out, err = await asyncio.wait_for(sending, WAIT_S)
        assert not err and out["state"] == "accepted", out
        assert delivered(at.root, out["message_id"]) == 1

    run_at_cap(1, body, monkeypatch)
