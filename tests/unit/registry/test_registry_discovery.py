from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.core.ids import new_message_id
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.registry.descriptor import Descriptor, write_descriptor
from crosstalk.registry.discovery import find_by_peer, is_live, list_descriptors, resolve
from crosstalk.registry.errors import AmbiguousName, NoSuchAgent
from crosstalk.registry.paths import StatePaths

ME = os.getpid()
MY_START = proc_start_time(ME) or "?"
DEAD_PID = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@pytest.fixture
def held() -> Iterator[list[FileLock]]:
    locks: list[FileLock] = []
    yield locks
    for lock in locks:
        lock.release()


def put(paths: StatePaths, held: list[FileLock], n: int, name: str, *, lock: bool = True, **kw: object) -> Descriptor:
    """A descriptor served by this test process (alive, right start time) whose agent lock we hold."""
    aid = f"{n:016x}"
    fields: dict[str, object] = {"pid": ME, "started_at": MY_START, **kw}
    desc = Descriptor(
        agent_id=aid,
        name=name,
        harness="fake",
        cwd=f"/w/p{n}",
        session_ref=f"s-{n}",
        uds_path=str(paths.uds_path(aid)),
        instance_id=new_message_id(),
        registered_at="2026-11-29T21:04:05.123Z",
        **fields,  # type: ignore[arg-type]
    )
    write_descriptor(paths, desc)
    if lock:
        agent_lock = FileLock(paths.agent_lock(aid))
        assert agent_lock.try_acquire()
        held.append(agent_lock)
    return desc


def test_liveness_needs_process_and_lock(paths: StatePaths, held: list[FileLock]) -> None:
    live = put(paths, held, 1, "live")
    dead_pid = put(paths, held, 2, "deadpid", pid=DEAD_PID)
    reused = put(paths, held, 3, "reused", started_at=str(int(MY_START) + 1))  # same pid, another process
    unlocked = put(paths, held, 4, "unlocked", lock=False)  # registration ended without cleanup
    assert [is_live(paths, d) for d in (live, dead_pid, reused, unlocked)] == [True, False, False, False]
    assert list_descriptors(paths) == [live]
    assert [d.name for d in list_descriptors(paths, include_stale=True)] == [
        "deadpid",
        "live",
        "reused",
        "unlocked",
    ]


def test_listing_ignores_junk(paths: StatePaths, held: list[FileLock]) -> None:
    live = put(paths, held, 1, "live")
    (paths.agents / "notes.json").write_text("{}")
    (paths.agents / f"{2:016x}.json").write_text("{corrupt")
    # A valid descriptor filed under another agent's id is not trusted.
    os.link(paths.descriptor(live.agent_id), paths.descriptor(f"{3:016x}"))
    assert list_descriptors(paths, include_stale=True) == [live]
    assert list_descriptors(StatePaths(paths.root / "absent")) == []


def test_resolve(paths: StatePaths, held: list[FileLock]) -> None:
    alice = put(paths, held, 1, "alice")
    put(paths, held, 2, "bob", pid=DEAD_PID)
    assert resolve(paths, "alice") == alice
    assert resolve(paths, alice.agent_id) == alice
    with pytest.raises(NoSuchAgent, match="'bob'") as err:
        resolve(paths, "bob")  # only a stale descriptor carries the name
    assert err.value.reason == "no_such_agent"
    assert err.value.stopped_pid == DEAD_PID and "is not running" in str(err.value)  # says why, not just "no"
    with pytest.raises(NoSuchAgent, match="is not running"):
        resolve(paths, f"{2:016x}")  # a stale agent_id is not resolved either
    with pytest.raises(NoSuchAgent, match="no live agent") as never:
        resolve(paths, "nobody")
    assert never.value.stopped_pid is None


def test_an_agent_id_never_reaches_an_agent_named_like_it(paths: StatePaths, held: list[FileLock]) -> None:
    """An impostor's descriptor names it with another agent's id while that agent is down: a send to the id finds
    no agent rather than the impostor (names of agent_id shape are refused at registration, too)."""
    put(paths, held, 1, "deadbeefdeadbeef")
    with pytest.raises(NoSuchAgent):
        resolve(paths, "deadbeefdeadbeef")


def test_resolve_ambiguous(paths: StatePaths, held: list[FileLock]) -> None:
    a = put(paths, held, 1, "twin")
    b = put(paths, held, 2, "twin")
    with pytest.raises(AmbiguousName, match="2 live agents are named 'twin'") as err:
        resolve(paths, "twin")
    assert err.value.reason == "ambiguous_name"
    assert err.value.candidates == [
        (a.agent_id, "twin", "fake", "/w/p1"),
        (b.agent_id, "twin", "fake", "/w/p2"),
    ]
    assert resolve(paths, a.agent_id) == a


def test_find_by_peer_zero_one_two(paths: StatePaths, held: list[FileLock]) -> None:
    # Zero: only stale descriptors point at us.
    put(paths, held, 1, "old", started_at=str(int(MY_START) + 1))
    put(paths, held, 2, "gone", lock=False)
    assert find_by_peer(paths, ME) is None
    assert find_by_peer(paths, DEAD_PID) is None
    # One: matched as the serving process, or as the hosting harness process.
    one = put(paths, held, 3, "one")
    assert find_by_peer(paths, ME) == one
    parent = os.getppid()
    hosted = put(paths, held, 4, "hosted", pid=ME, harness_pid=parent, harness_started_at=proc_start_time(parent))
    # Two: a pooled process serving two agents is never attributed to either.
    assert find_by_peer(paths, ME) is None
    assert find_by_peer(paths, parent) == hosted
    put(paths, held, 5, "wrong-host-start", harness_pid=parent, harness_started_at="1")
    assert find_by_peer(paths, parent) == hosted


def test_stale_descriptors_are_listed_only_on_request(paths: StatePaths, held: list[FileLock]) -> None:
    # Removing them is doctor's (doctor/prune.py, tests/integration/doctor/test_doctor_stale.py).
    live = put(paths, held, 1, "live")
    put(paths, held, 2, "deadpid", pid=DEAD_PID, lock=False)
    put(paths, held, 3, "unlocked", lock=False)
    put(paths, held, 4, "registering", pid=DEAD_PID)  # stale file, but its lock is held again
    (paths.agents / f"{5:016x}.json").write_text("{corrupt")
    assert list_descriptors(paths) == [live]
    everything = {d.name for d in list_descriptors(paths, include_stale=True)}
    assert everything == {"live", "deadpid", "unlocked", "registering"}
