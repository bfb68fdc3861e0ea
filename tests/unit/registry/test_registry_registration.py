from __future__ import annotations

import os

import pytest

from crosstalk.core.ids import agent_id_for, is_message_id
from crosstalk.fs.locks import FileLock, is_locked
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.registry.descriptor import read_descriptor, write_descriptor
from crosstalk.registry.errors import AgentAlreadyRegistered, InvalidName, NameHeld, RegistryError
from crosstalk.registry.names import fallback_names
from crosstalk.registry.paths import StatePaths
from crosstalk.registry.registration import Registration


def acquire(paths: StatePaths, ref: str = "s-1", name: str | None = "alice") -> Registration:
    return Registration.acquire(paths, harness="fake", session_ref=ref, preferred_name=name, cwd="/w/proj")


def test_acquire_publish_close(paths: StatePaths) -> None:
    reg = acquire(paths)
    aid = agent_id_for("fake", "s-1")
    assert (reg.agent_id, reg.name, reg.name_notice) == (aid, "alice", None)
    assert is_message_id(reg.instance_id)
    assert is_locked(paths.agent_lock(aid)) and is_locked(paths.name_lock("alice"))
    desc = reg.publish(a2a_url="http://127.0.0.1:1", harness_pid=os.getppid())
    assert desc.pid == os.getpid() and desc.started_at == proc_start_time(os.getpid())
    assert desc.harness_started_at == proc_start_time(os.getppid())
    assert desc.uds_path == str(paths.uds_path(aid))
    assert read_descriptor(paths.descriptor(aid)) == desc
    reg.close()
    assert not paths.descriptor(aid).exists()
    assert not is_locked(paths.agent_lock(aid)) and not is_locked(paths.name_lock("alice"))
    assert paths.agent_lock(aid).exists() and paths.name_lock("alice").exists()  # lock files are kept
    reg.close()  # idempotent
    with pytest.raises(RegistryError, match="closed"):
        reg.publish()
    with pytest.raises(RegistryError, match="closed"):
        reg.rename("bob")


def test_publish_a_built_descriptor(paths: StatePaths) -> None:
    with acquire(paths) as reg:
        desc = reg.build_descriptor(role="worker")
        assert reg.publish(desc) is desc
        with pytest.raises(TypeError):
            reg.publish(desc, role="x")  # type: ignore[call-arg]

        with pytest.raises(RegistryError, match="is not this registration's"):
            reg.publish(desc.with_(name="mallory"))
    assert not paths.descriptor(reg.agent_id).exists()


def test_same_agent_twice_is_refused(paths: StatePaths) -> None:
    with acquire(paths) as first:
        first.publish()
        with pytest.raises(AgentAlreadyRegistered, match=rf"agent {first.agent_id} \(name 'alice', pid \d+\)"):
            acquire(paths, name="other")
        assert not is_locked(paths.name_lock("other"))  # the loser took no name


def test_held_name_falls_back_with_notice(paths: StatePaths) -> None:
    with acquire(paths, "s-1") as winner, acquire(paths, "s-2") as loser:
        assert winner.name == "alice"
        expected = next(fallback_names("fake", "/w/proj", loser.agent_id))
        assert loser.name == expected
        assert loser.name_notice == f"the name 'alice' is held by a live agent; registered as '{expected}'"


def test_first_fallback_held_extends_suffix(paths: StatePaths) -> None:
    aid = agent_id_for("fake", "s-5")
    first, second = list(fallback_names("fake", "/w/proj", aid))[:2]
    squatter = FileLock(paths.name_lock(first))
    assert squatter.try_acquire()
    try:
        with acquire(paths, "s-5", name=None) as reg:
            assert reg.name == second
            assert reg.name_notice == f"the name '{first}' is held by a live agent; registered as '{second}'"
    finally:
        squatter.release()


def test_invalid_preferred_name_is_told(paths: StatePaths) -> None:
    with acquire(paths, name="no spaces please") as reg:
        assert reg.name.startswith("fake-proj-")
        assert reg.name_notice is not None and "not a valid agent name" in reg.name_notice


def test_rename(paths: StatePaths) -> None:
    with acquire(paths) as reg, acquire(paths, "s-2", name="carol") as other:
        reg.publish()
        with pytest.raises(NameHeld, match="'carol'"):
            reg.rename("carol")
        with pytest.raises(InvalidName):
            reg.rename("bad name")
        assert reg.name == "alice"
        reg.rename("bob")
        assert reg.name == "bob"
        assert read_descriptor(paths.descriptor(reg.agent_id)).name == "bob"  # type: ignore[union-attr]
        assert is_locked(paths.name_lock("bob")) and not is_locked(paths.name_lock("alice"))
        reg.rename("bob")  # no-op
        assert other.name == "carol"


def test_close_leaves_another_instances_descriptor(paths: StatePaths) -> None:
    # A late exit path of an older instance must not delete the descriptor that replaced it.

    from crosstalk.core.ids import new_message_id

    reg = acquire(paths)
    desc = reg.publish()
    newer = desc.with_(instance_id=new_message_id())
    write_descriptor(paths, newer)
    reg.close()
    assert read_descriptor(paths.descriptor(reg.agent_id)) == newer


def test_reacquire_after_close(paths: StatePaths) -> None:
    with acquire(paths) as reg:
        reg.publish()
    with acquire(paths) as again:
        assert again.name == "alice" and again.name_notice is None
        assert again.instance_id != reg.instance_id
