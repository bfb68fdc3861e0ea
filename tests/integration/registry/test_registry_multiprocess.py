from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from crosstalk.core.ids import agent_id_for
from crosstalk.fs.locks import FileLock, is_locked
from crosstalk.fs.procinfo import pid_alive
from crosstalk.registry.descriptor import read_descriptor
from crosstalk.registry.discovery import find_by_peer, is_live, list_descriptors, resolve
from crosstalk.registry.names import fallback_names
from crosstalk.registry.paths import StatePaths
from crosstalk.registry.registration import Registration
from tests.support.registry_child import prune_stale


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.01)


def acquire_cmd(state: StatePaths, ref: str, name: str | None = "alice", at: float | None = None) -> dict[str, Any]:
    cmd: dict[str, Any] = {
        "op": "acquire",
        "root": str(state.root),
        "harness": "fake",
        "session_ref": ref,
        "preferred": name,
        "cwd": "/w/proj",
    }
    if at is not None:
        cmd["at"] = at
    return cmd


def test_lock_is_exclusive_across_processes_and_file_survives(state: StatePaths, spawn: Any) -> None:
    path = state.root / "x.lock"
    child = spawn()
    assert child.ask(op="lock", path=str(path)) == {"held": True}
    mine = FileLock(path)
    assert not mine.try_acquire()
    assert is_locked(path)
    child.kill()  # the kernel drops the dead holder's lock
    assert not is_locked(path)
    assert mine.try_acquire()
    mine.release()
    assert path.exists()


@pytest.mark.parametrize("round_", range(5))
def test_race_for_one_name(state: StatePaths, spawn: Any, round_: int) -> None:
    a, b = spawn(), spawn()
    at = time.time() + 0.3
    a.send(**acquire_cmd(state, f"a{round_}", at=at))
    b.send(**acquire_cmd(state, f"b{round_}", at=at))
    results = {"a": a.read(), "b": b.read()}
    winners = [k for k, r in results.items() if r["name"] == "alice"]
    assert len(winners) == 1, results
    winner_key = winners[0]
    loser_key = "b" if winner_key == "a" else "a"
    winner, loser = results[winner_key], results[loser_key]
    expected = next(fallback_names("fake", "/w/proj", loser["agent_id"]))
    assert loser["name"] == expected
    assert loser["notice"] == f"the name 'alice' is held by a live agent; registered as '{expected}'"
    assert winner["notice"] is None
    assert resolve(state, "alice").agent_id == winner["agent_id"]
    # The loser's exit path never touches the winner's descriptor.
    loser_child = a if loser_key == "a" else b
    assert loser_child.ask(op="close") == {"closed": 1}
    assert read_descriptor(state.descriptor(loser["agent_id"])) is None
    survivor = read_descriptor(state.descriptor(winner["agent_id"]))
    assert survivor is not None and survivor.instance_id == winner["instance_id"]
    assert [d.name for d in list_descriptors(state)] == ["alice"]


@pytest.mark.parametrize("round_", range(3))
def test_race_for_one_agent(state: StatePaths, spawn: Any, round_: int) -> None:
    a, b = spawn(), spawn()
    at = time.time() + 0.3
    for child in (a, b):
        child.send(**acquire_cmd(state, "same", at=at))
    results = [a.read(), b.read()]
    ok = [r for r in results if "name" in r]
    refused = [r for r in results if "error" in r]
    assert len(ok) == 1 and len(refused) == 1, results
    assert refused[0]["error"] == "AgentAlreadyRegistered"
    assert agent_id_for("fake", "same") in refused[0]["message"]
    # The loser cleaning up (close, then a stale sweep) never removes the winner's descriptor.
    loser = a if "error" in results[0] else b
    assert loser.ask(op="close") == {"closed": 0}
    assert loser.ask(op="sweep", root=str(state.root)) == {"swept": 0}
    desc = read_descriptor(state.descriptor(ok[0]["agent_id"]))
    assert desc is not None and desc.instance_id == ok[0]["instance_id"]
    assert is_live(state, desc)


def test_sweep_after_kill_9(state: StatePaths, spawn: Any) -> None:
    child = spawn()
    reg = child.ask(**acquire_cmd(state, "s-1"))
    aid = reg["agent_id"]
    desc = resolve(state, "alice")
    assert desc.pid == child.pid
    assert find_by_peer(state, child.pid) == desc
    child.kill9()
    # Even before the zombie is reaped (its pid still answers kill 0) the descriptor is stale.
    wait_for(lambda: not is_locked(state.agent_lock(aid)))
    assert not is_live(state, desc)
    child.kill()  # reap
    assert not pid_alive(child.pid)
    assert list_descriptors(state) == []
    assert [d.agent_id for d in list_descriptors(state, include_stale=True)] == [aid]
    assert find_by_peer(state, child.pid) is None
    assert prune_stale(state) == 1
    assert not state.descriptor(aid).exists()
    assert state.agent_lock(aid).exists() and state.name_lock("alice").exists()
    assert prune_stale(state) == 0
    # The session comes back under its name: the dead holder's name lock went with it.
    with Registration.acquire(state, harness="fake", session_ref="s-1", preferred_name="alice", cwd="/w") as again:
        assert (again.agent_id, again.name, again.name_notice) == (aid, "alice", None)


def test_replacement_survives_old_exit_path(state: StatePaths, spawn: Any) -> None:
    # A second process cannot take a held agent; after the first dies it registers,
    # and a late cleanup (sweep by anyone) never removes the second's descriptor.
    first, second, bystander = spawn(), spawn(), spawn()
    r1 = first.ask(**acquire_cmd(state, "s-1"))
    assert r1["name"] == "alice"
    assert second.ask(**acquire_cmd(state, "s-1"))["error"] == "AgentAlreadyRegistered"
    first.kill()
    r2 = second.ask(**acquire_cmd(state, "s-1"))
    assert r2["name"] == "alice" and r2["agent_id"] == r1["agent_id"]
    assert bystander.ask(op="sweep", root=str(state.root)) == {"swept": 0}
    assert prune_stale(state) == 0
    desc = resolve(state, "alice")
    assert desc.instance_id == r2["instance_id"] and desc.pid == second.pid


def test_stale_descriptor_left_while_newcomer_registers(state: StatePaths, spawn: Any) -> None:
    # A newcomer that holds the agent lock but has not published yet: the dead owner's file is not swept
    # from under it (the lock is held), and the newcomer's publish replaces it.
    child = spawn()
    r1 = child.ask(**acquire_cmd(state, "s-1"))
    child.kill()
    reg = Registration.acquire(state, harness="fake", session_ref="s-1", preferred_name="alice", cwd="/w")
    try:
        stale = read_descriptor(state.descriptor(r1["agent_id"]))
        assert stale is not None and stale.instance_id == r1["instance_id"]
        bystander = spawn()
        assert bystander.ask(op="sweep", root=str(state.root)) == {"swept": 0}
        assert state.descriptor(r1["agent_id"]).exists()
        desc = reg.publish()
        assert resolve(state, "alice") == desc
    finally:
        reg.close()
