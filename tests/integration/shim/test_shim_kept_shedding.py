"""A peer's socket at its connection cap (ingress/uds.py MAX_CONNECTIONS, made 4 here) sheds its longest-idle KEPT
connection (uds_tasks.IdleKept) to admit a new sender, never one with a frame in flight; the sender whose kept
connection was shed sends its next message on a fresh connection, without an error, delivered exactly once. Real
agents on real unix sockets, in one process (tests/support/shim_tools.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.message import new_message
from crosstalk.ingress import uds as uds_mod
from crosstalk.ingress import uds_kept, uds_tasks
from crosstalk.ingress.uds_client import deliver
from crosstalk.ingress.uds_task_client import UdsTaskClient
from tests.support.shim_tools import ALICE, BOB, WAIT_S, call, inbox, router, run, until

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


async def fill(root: Path, a: Any, b: Any) -> tuple[tuple[str, str, str], UdsTaskClient, list[UdsTaskClient], Any]:
    """bob at its cap with idle kept connections: alice's shim's own, and three more clients with alice's token,
    opened in that order. Returns (where, alice's client, the three, bob's ingress)."""
    await call(b, "list_agents", BOB)
    out, err = await call(a, "send_message", ALICE, to="bob", text="opens alice's kept connection")
    assert not err and out["state"] == "accepted", out
    [(_instances, where, client)] = a.sender._uds.values()
    others = [UdsTaskClient(*where, keep=True) for _ in range(CAP - 1)]
    for i, other in enumerate(others):
        view = await other.send(new_message("bob", f"fill {i}"))
        assert view.delivery == "accepted", view
    ingress = b.pool.hosts()[0]._ingress
    await until(lambda: len(ingress._idle_kept) == CAP, "bob's cap filled with idle kept connections")
    assert len(ingress._handlers) == CAP
    return where, client, others, ingress


def test_a_new_sender_gets_through_a_cap_of_idle_kept_ones_and_the_shed_one_reconnects_once(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(uds_mod, "MAX_CONNECTIONS", CAP)

    async def main(root: Path) -> None:
        a, b = router(root), router(root)
        others: list[UdsTaskClient] = []
        try:
            where, alice, others, ingress = await fill(root, a, b)
            # alice sends again on her kept connection: now others[0] has been idle longest, not the oldest (hers).
            out, err = await call(a, "send_message", ALICE, to="bob", text="alice again")
            assert not err and out["state"] == "accepted", out
            shed = kept_conn(others[0])

            outcome = await new_sender(where, "a new sender at the cap")
            assert outcome.state.value == "accepted", outcome
            assert delivered(root, outcome.message_id) == 1
            await until(lambda: not shed.usable(), "the longest-idle kept connection closed by bob")
            assert all(kept_conn(c).usable() for c in [alice, *others[1:]])  # nothing else was shed
            await until(lambda: len(ingress._handlers) == CAP - 1, "the new sender's and the shed handler gone")

            # The shed connection's owner: its next message on a fresh connection, no error, delivered once.
            again = new_message("bob", "after the shed")
            view = await others[0].send(again)
            assert view.delivery == "accepted", view
            assert others[0].connections.opened == 2
            assert delivered(root, again.message_id) == 1
            assert len(ingress._handlers) == CAP and len(ingress._shedding) == 0
        finally:
            for other in others:
                await other.close()
            await a.close()
            await b.close()

    run(main)


def test_a_frame_written_on_a_connection_already_shed_is_sent_again_once(monkeypatch: pytest.MonkeyPatch):
    """The close reaches the sender after it wrote its next frame (the race `usable()` cannot see): the frame was
    never read by bob, the sender sends it once more on a fresh connection, and bob delivers it once."""
    monkeypatch.setattr(uds_mod, "MAX_CONNECTIONS", CAP)

    async def main(root: Path) -> None:
        a, b = router(root), router(root)
        others: list[UdsTaskClient] = []
        try:
            where, alice, others, _ingress = await fill(root, a, b)
            shed = kept_conn(alice)  # the longest idle: opened first, not used since
            outcome = await new_sender(where, "a new sender at the cap")
            assert outcome.state.value == "accepted", outcome
            await until(lambda: not shed.usable(), "alice's kept connection closed by bob")

            monkeypatch.setattr(uds_kept.Conn, "usable", lambda self: True)  # taken as if the close had not come
            out, err = await call(a, "send_message", ALICE, to="bob", text="written into the closed connection")
            assert not err and out["state"] == "accepted", out
            assert alice.connections.opened == 2
            assert delivered(root, out["message_id"]) == 1
        finally:
            for other in others:
                await other.close()
            await a.close()
            await b.close()

    run(main)


def test_a_kept_connection_with_a_frame_in_flight_is_never_shed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(uds_mod, "MAX_CONNECTIONS", 1)
    served = uds_tasks.serve_task
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(desk: Any, line: Any, pid: int, to: str, **kw: Any) -> bytes:
        if "held" in str(line.params.get("message", {}).get("parts")):
            entered.set()
            await release.wait()
        return await served(desk, line, pid, to, **kw)

    monkeypatch.setattr(uds_tasks, "serve_task", held)

    async def main(root: Path) -> None:
        a, b = router(root), router(root)
        try:
            await call(b, "list_agents", BOB)
            first, _ = await call(a, "send_message", ALICE, to="bob", text="opens the connection")
            assert first["state"] == "accepted", first
            [(_instances, where, _client)] = a.sender._uds.values()
            sending = asyncio.create_task(call(a, "send_message", ALICE, to="bob", text="held in flight"))
            await asyncio.wait_for(entered.wait(), WAIT_S)

            outcome = await new_sender(where, "a new sender at the cap")
            assert outcome.state.value == "rejected" and outcome.reason.startswith("busy:"), outcome

            release.set()
            out, err = await asyncio.wait_for(sending, WAIT_S)
            assert not err and out["state"] == "accepted", out
            assert delivered(root, out["message_id"]) == 1
        finally:
            release.set()
            await a.close()
            await b.close()

    run(main)
