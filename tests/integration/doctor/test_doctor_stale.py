"""Stale descriptors, sockets and keys, with real processes: `--fix` removes what a dead process left, and never
what a live agent (or a process that might be alive) owns."""

from __future__ import annotations

import os

from crosstalk.doctor.gather.state import gather_leftovers
from crosstalk.doctor.prune import prune
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import proc_start_time
from tests.support.doctor_machine import Machine, problems


def test_a_dead_agents_files_are_reported_and_fix_removes_only_them(machine: Machine) -> None:
    live = machine.start_agent("alive")
    pid, started = machine.dead_process()
    dead = machine.stale_agent("gone", pid, started)
    assert len(machine.agent_files(dead)) == 4

    code, report = machine.doctor()
    assert code == 1
    [stale] = problems(report, "stale")
    assert f"stale agent gone ({dead}), pid {pid}" in stale["text"]
    assert "its process is gone" in stale["text"]
    assert stale["fix"] == "crosstalk doctor --fix"

    code, report = machine.doctor("--fix")
    assert code == 0, report
    assert machine.agent_files(dead) == []
    assert sorted(report["fixed"]["removed"]) == sorted(
        str(p) for p in (
            machine.paths.descriptor(dead), machine.paths.uds_path(dead), machine.paths.key_path(dead),
            machine.paths.token_path(dead),
        )
    )  # fmt: skip
    # The live agent's descriptor, socket, key and token all survive, and it still answers.
    assert len(machine.agent_files(live["agent_id"])) == 4
    assert machine.crosstalk("send", "alive", "still here?", "--kind", "ping").returncode == 0


def test_a_killed_agent_is_stale_and_a_reused_pid_does_not_keep_it_alive(machine: Machine) -> None:
    victim = machine.start_agent("victim")
    machine.kill(victim["pid"])
    # pid reuse: a descriptor naming a running process (this test) with another start time is still dead.
    reused = machine.stale_agent("reused", os.getpid(), "1")
    code, report = machine.doctor()
    texts = [f["text"] for f in problems(report, "stale")]
    assert code == 1
    assert any(f"victim ({victim['agent_id']})" in t and "its process is gone" in t for t in texts), texts
    assert any(f"reused ({reused})" in t and "was reused by another process" in t for t in texts), texts
    machine.doctor("--fix")
    assert machine.agent_files(victim["agent_id"]) == []
    assert machine.agent_files(reused) == []


def test_nothing_whose_process_may_be_alive_is_removed(machine: Machine) -> None:
    # A descriptor naming a running process with its real start time, though no lock is held: not provably dead.
    sleeper = machine.sleeper()
    started = proc_start_time(sleeper.pid)
    assert started is not None
    running = machine.stale_agent("running", sleeper.pid, started)
    # A dead process's files whose agent lock is held (a registration opening right now): not provably dead.
    pid, dead_start = machine.dead_process()
    locked = machine.stale_agent("locked", pid, dead_start)
    lock = FileLock(machine.paths.agent_lock(locked))
    assert lock.try_acquire()
    try:
        code, report = machine.doctor("--fix")
        assert code == 0, report
        assert report["fixed"]["removed"] == []
        assert len(machine.agent_files(running)) == 4
        assert len(machine.agent_files(locked)) == 4
    finally:
        lock.release()
    # Once the lock is free, the dead one goes; the running one stays.
    result = prune(machine.paths, machine.env)
    assert machine.agent_files(locked) == []
    assert len(machine.agent_files(running)) == 4
    assert str(machine.paths.descriptor(running)) not in result.removed


def test_a_socket_and_key_with_no_descriptor_go_only_when_no_registration_owns_them(machine: Machine) -> None:
    pid, started = machine.dead_process()
    orphan = machine.stale_agent("orphan", pid, started)
    machine.paths.descriptor(orphan).unlink()  # died before publishing: socket and keys, no descriptor
    [agent] = gather_leftovers(machine.paths, machine.env).agents
    assert agent.pid is None and not agent.lock_held
    code, report = machine.doctor()
    [stale] = problems(report, "stale")
    assert code == 1 and "no registration owns them" in stale["text"]
    assert len(prune(machine.paths, machine.env).removed) == 3
    assert machine.agent_files(orphan) == []


def test_a_temp_file_of_a_dead_writer_is_pruned_and_a_live_writers_is_kept(machine: Machine) -> None:
    machine.paths.ensure()
    pid, _ = machine.dead_process()
    dead_tmp = machine.paths.agents / f".0123456789abcdef.json.{pid}.00ff00ff.tmp"
    live_tmp = machine.paths.agents / f".0123456789abcdef.json.{os.getpid()}.00ff00ff.tmp"
    dead_tmp.write_text("{")
    live_tmp.write_text("{")
    code, report = machine.doctor()
    assert code == 1
    assert [f"temp file {dead_tmp} left by pid {pid}, which is gone"] == [f["text"] for f in problems(report, "stale")]
    assert machine.doctor("--fix")[0] == 0
    assert not dead_tmp.exists() and live_tmp.exists()


def test_a_killed_agents_native_claude_peer_record_is_pruned_and_a_live_ones_kept(machine: Machine) -> None:
    assert machine.crosstalk("install", "claude", "--native-peers").returncode == 0
    live = machine.start_agent("peer-live")
    victim = machine.start_agent("peer-gone")
    sessions = machine.home / ".claude" / "sessions"
    assert (sessions / f"{live['pid']}.json").exists() and (sessions / f"{victim['pid']}.json").exists()
    machine.kill(victim["pid"])
    code, report = machine.doctor()
    peer = [p for p in problems(report, "stale") if "Claude peer" in p["text"]]
    assert code == 1
    assert [p["text"] for p in peer] == [
        f"stale Claude peer record in {sessions} (agent peer-gone, pid {victim['pid']}, which is gone): Claude lists "
        "a dead peer"
    ]
    code, report = machine.doctor("--fix")
    assert code == 0, problems(report)
    assert str(sessions / f"{victim['pid']}.json") in report["fixed"]["removed"]
    assert not (sessions / f"{victim['pid']}.json").exists()
    assert (sessions / f"{live['pid']}.json").exists()  # the live agent's peer record and key stay
    assert len(list(sessions.glob(f"{live['pid']}.*.key"))) == 1
