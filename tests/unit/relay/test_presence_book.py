"""Presence frames and the book a relay process keeps (relay/presence.py): the machine is the subject's, every field
is checked and capped, a machine expires EXPIRY_INTERVALS of its (clamped) intervals after it was last heard, and a
reader sees nothing while no relay process holds the lock."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from crosstalk.fs.locks import FileLock
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.config import relay_dir, serve_lock_path
from crosstalk.relay.errors import FrameError
from crosstalk.relay.presence import (
    EXPIRY_INTERVALS,
    MAX_AGENTS,
    MAX_INTERVAL_S,
    MAX_MACHINES,
    MAX_REASON_CHARS,
    PresenceBook,
    RemoteAgent,
    alias_of_presence,
    decode_presence,
    encode_presence,
    interval_s,
    presence_path,
    read_presence,
    remote_rows,
)
from crosstalk.relay.presence_loop import PresenceLoop
from tests.support.waiting import until_async


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def frame(agents: list[object], interval: object = 1.0) -> bytes:
    return json.dumps({"v": 1, "interval": interval, "agents": agents}).encode()


ALICE = {"name": "alice", "harness": "claude", "reachable": True}


@pytest.fixture
def paths(tmp_path: Path) -> StatePaths:
    p = StatePaths(tmp_path / "state")
    relay_dir(p).mkdir(parents=True)
    return p


def test_the_alias_is_the_subjects() -> None:
    assert alias_of_presence("crosstalk.v1.presence.laptop") == "laptop"
    for bad in ("crosstalk.v1.presence.a.b", "crosstalk.v1.msg.laptop", "crosstalk.v1.presence.", "x.laptop"):
        with pytest.raises(FrameError):
            alias_of_presence(bad)


def test_a_frame_round_trips_and_carries_nothing_else() -> None:
    agents = (RemoteAgent("alice", "claude", True), RemoteAgent("bob", "codex", False, "its socket is gone"))
    ann = decode_presence(encode_presence(agents, 5.0))
    assert (ann.agents, ann.interval, ann.gone) == (agents, 5.0, False)
    assert decode_presence(encode_presence((), 5.0, gone=True)).gone


def test_bad_entries_are_skipped_and_fields_capped() -> None:
    raw = [
        {"name": "../x", "harness": "fake", "reachable": True},
        {"name": "ok", "harness": "fake"},  # no reachability
        {"name": "h", "harness": "we ird", "reachable": True},
        {"name": "r", "harness": "fake", "reachable": False, "reason": "\x1b[31m" + "z" * 500},
        ALICE,
        {**ALICE, "harness": "codex"},  # a name twice: the first stands
        "not an object",
    ]
    ann = decode_presence(frame(raw))
    assert [a.name for a in ann.agents] == ["r", "alice"]
    reason = ann.agents[0].reason
    assert reason is not None and len(reason) == MAX_REASON_CHARS and "\x1b" not in reason
    assert ann.agents[1].harness == "claude"
    many = decode_presence(frame([{**ALICE, "name": f"a{i}"} for i in range(MAX_AGENTS + 50)]))
    assert len(many.agents) == MAX_AGENTS
    assert decode_presence(frame([], 1e9)).interval == MAX_INTERVAL_S
    for bad in (b"x" * 70_000, b"[]", b'{"v": 2}', frame([], "soon"), b'{"v":1,"interval":1}'):
        with pytest.raises(FrameError):
            decode_presence(bad)


def test_the_book_keeps_others_expires_them_and_writes_0600(paths: StatePaths) -> None:
    clock = Clock()
    book = PresenceBook(paths, "gpu", clock)
    assert book.heard("laptop", frame([ALICE], 2.0)) is True
    assert book.heard("laptop", frame([ALICE], 2.0)) is False  # nothing a reader sees changed
    assert book.heard("gpu", frame([ALICE])) is False  # its own announcement is not another machine's
    assert book.heard("evil", b"junk") is False
    book.write()
    assert stat.S_IMODE(os.stat(presence_path(paths)).st_mode) == 0o600
    clock.now += EXPIRY_INTERVALS * 2.0 - 0.1
    assert book.expire() is False
    clock.now += 0.2
    assert book.expire() is True and book.machines == {}
    book.heard("laptop", frame([ALICE]))
    assert book.heard("laptop", encode_presence((), 1.0, gone=True)) is True and book.machines == {}


def test_the_book_takes_at_most_max_machines(paths: StatePaths) -> None:
    book = PresenceBook(paths, "gpu", Clock())
    for i in range(MAX_MACHINES + 5):
        book.heard(f"m{i}", frame([ALICE]))
    assert len(book.machines) == MAX_MACHINES
    assert book.heard("m0", frame([ALICE, {**ALICE, "name": "bob"}])) is True  # one already kept still updates


def test_readers_see_it_only_while_a_relay_process_holds_the_lock(paths: StatePaths) -> None:
    assert read_presence(paths) == {}  # not joined: nothing, and no file read
    book = PresenceBook(paths, "gpu", Clock())
    book.heard("laptop", frame([ALICE, {"name": "bob", "harness": "codex", "reachable": False, "reason": "busy"}]))
    book.write()
    assert read_presence(paths) == {}  # no relay process: nothing here is current
    lock = FileLock(serve_lock_path(paths))
    assert lock.try_acquire()
    try:
        assert remote_rows(paths) == [
            {"name": "alice@laptop", "harness": "claude", "reachable": True, "machine": "laptop"},
            {"name": "bob@laptop", "harness": "codex", "reachable": False, "reason": "busy", "machine": "laptop"},
        ]
        presence_path(paths).write_text('{"machines": {"bad.alias": {}, "ok": {"agents": [1, {"name": "x"}]}}}')
        assert read_presence(paths) == {"ok": ()}
    finally:
        lock.release()


def test_the_interval_comes_from_the_environment_clamped() -> None:
    assert interval_s({}) == 5.0
    assert interval_s({"CROSSTALK_RELAY_PRESENCE_S": "0.5"}) == 0.5
    assert interval_s({"CROSSTALK_RELAY_PRESENCE_S": "0"}) == 0.2
    assert interval_s({"CROSSTALK_RELAY_PRESENCE_S": "nope"}) == 5.0


def test_an_older_snapshot_never_replaces_a_newer_one(paths: StatePaths) -> None:
    book = PresenceBook(paths, "gpu", Clock())
    book.heard("laptop", frame([ALICE]))
    older = book.snapshot()
    book.heard("laptop", frame([ALICE, {**ALICE, "name": "bob"}]))
    newer = book.snapshot()
    book.write_snapshot(*newer)
    book.write_snapshot(*older)  # a slower worker thread finishing late
    assert len(json.loads(presence_path(paths).read_text())["machines"]["laptop"]["agents"]) == 2
    book.clear()
    book.write_snapshot(*newer)  # nothing heard before the removal comes back after it
    assert not presence_path(paths).exists()


def test_a_machine_announcing_fast_costs_a_few_writes_a_second(paths: StatePaths) -> None:
    """However often frames that change something arrive, the file is written at most every WRITE_GAP_S, and the
    last change is written by the loop's next pass."""
    import asyncio
    from types import SimpleNamespace

    async def run() -> None:
        stop = asyncio.Event()
        loop = PresenceLoop(paths, "gpu", SimpleNamespace(is_connected=False), 0.2, stop)
        writes: list[int] = []
        loop.book.write_snapshot = lambda seq, data: writes.append(seq)  # type: ignore[method-assign]
        for i in range(200):
            msg = SimpleNamespace(subject="crosstalk.v1.presence.evil", data=frame([{**ALICE, "name": f"a{i}"}]))
            await loop._heard(msg)
        assert len(writes) <= 2 and loop.dirty
        task = asyncio.create_task(loop._run())
        await until_async(lambda: not loop.dirty, "the loop wrote the last change", 5.0)
        stop.set()
        await asyncio.wait_for(task, 5.0)
        assert writes[-1] == loop.book._seq

    asyncio.run(run())
