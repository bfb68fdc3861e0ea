"""The sending side of a native write (shim/held.py): the receiving harness's later word comes to this shim, and
the sending session is told the final word once: a held message's, and a queued message's loss (Qwen's `expired`
after `delivered`: the session exited with it unread). A host stand-in records what is journaled and told."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from crosstalk.core.states import State
from crosstalk.harness.base import InjectResult
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.held import HeldSends, notice


class Told:
    delivered = True


class Host:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.told: list[str] = []
        self.state = self

    @property
    def held_sends(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for rec in self.records:
            out[rec["message_id"]] = {**out.get(rec["message_id"], {}), **rec}
        return out

    async def record(self, recs: list[dict[str, Any]]) -> None:
        self.records.extend(recs)

    async def notify(self, text: str) -> Told:
        self.told.append(text)
        return Told()


async def until(cond: Any) -> None:
    for _ in range(500):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never")


def run(tmp_path: Path, first: State, *later: InjectResult) -> Host:
    async def main() -> Host:
        host, held = Host(), HeldSends(StatePaths(tmp_path), lambda *_: None)
        settled = held.native_callback(host, "m1", "q-1")  # type: ignore[arg-type]
        await held.held_native(host, "m1", "q-1", first.value, None)  # type: ignore[arg-type]
        for word in later:  # receipts come seconds apart: each is handled before the next
            settled("m1", word)
            await asyncio.sleep(0)  # one loop turn: the word handed over (call_soon_threadsafe) is spawned
            await until(lambda: not held._tasks)
        await held.close()
        return host

    return asyncio.run(main())


EXPIRED = InjectResult(State.UNREACHABLE, "expired: it never reached the model (the session exited)")
RELEASED = InjectResult(State.QUEUED, "released by its user; delivered: Qwen Code queued it for its model")


def test_a_queued_send_lost_unread_is_told_once(tmp_path: Path) -> None:
    host = run(tmp_path, State.QUEUED, EXPIRED, EXPIRED)
    assert host.told == [notice("m1", "q-1", "unreachable", EXPIRED.reason, "queued for its model")]
    assert "queued for its model, was not delivered (unreachable): expired" in host.told[0]
    assert [r["state"] for r in host.records] == ["unreachable", "unreachable"]  # the loss, then told (notified)
    assert host.records[-1]["notified"] is True


def test_a_queued_send_says_nothing_more_unless_it_is_lost(tmp_path: Path) -> None:
    assert run(tmp_path, State.QUEUED, RELEASED).told == []
    assert run(tmp_path, State.ACCEPTED, EXPIRED).told == []  # only a queued answer is watched for a loss


def test_a_held_send_released_then_lost_is_told_both(tmp_path: Path) -> None:
    host = run(tmp_path, State.HELD, RELEASED, EXPIRED)
    assert host.told[0].startswith("crosstalk: your message m1 to q-1, held for its user, was delivered: released")
    assert host.told[1:] == [notice("m1", "q-1", "unreachable", EXPIRED.reason, "queued for its model")]
