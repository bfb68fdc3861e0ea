"""`crosstalk doctor --fix`: remove what is provably dead, proving it again at the moment of removal.

An agent's files go only while doctor itself holds that agent's lock (so no registration is open or can open) and
its descriptor, read again under the lock, names a process that no longer runs with its recorded start time. A
temp file goes when its writer pid is gone; a dispatcher's pid file and wake socket only while doctor holds that
dispatcher's lock; a native Claude peer record crosstalk published when its pid no longer runs with its procStart
(harness/claude/peers.py, which touches only crosstalk's own records). Lock files themselves are never removed
(fs/locks.py). Anything else stays."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crosstalk.core.ids import is_agent_id
from crosstalk.doctor.facts import Leftovers
from crosstalk.doctor.gather.state import gather_leftovers
from crosstalk.fs.atomic import temp_writer_pid
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import is_same_process, pid_alive
from crosstalk.harness.claude import peers as claude_peers
from crosstalk.registry.descriptor import read_descriptor
from crosstalk.registry.paths import StatePaths


@dataclass(frozen=True, slots=True)
class PruneResult:
    removed: tuple[str, ...]
    kept: tuple[str, ...]  # looked dead before, but not provably so at removal time


def _unlink(path: Path, removed: list[str]) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        removed.append(str(path))


def _agent_files(paths: StatePaths, agent_id: str) -> tuple[Path, ...]:
    return (
        paths.descriptor(agent_id), paths.uds_path(agent_id), paths.key_path(agent_id), paths.token_path(agent_id),
    )  # fmt: skip


def prune_agent(paths: StatePaths, agent_id: str, removed: list[str], kept: list[str]) -> None:
    if not is_agent_id(agent_id):
        return
    lock = FileLock(paths.agent_lock(agent_id))
    if not lock.try_acquire():
        kept.append(agent_id)  # a registration holds it: alive
        return
    try:
        desc = read_descriptor(paths.descriptor(agent_id))
        if desc is not None and is_same_process(desc.pid, desc.started_at):
            kept.append(agent_id)  # its process runs: not ours to judge
            return
        for path in _agent_files(paths, agent_id):
            _unlink(path, removed)
    finally:
        lock.release()


def prune(paths: StatePaths, environ: Mapping[str, str], leftovers: Leftovers | None = None) -> PruneResult:
    """Remove the dead among `leftovers` (gathered afresh when not given)."""
    from crosstalk.doctor.checks.stale import is_dead

    leftovers = leftovers if leftovers is not None else gather_leftovers(paths, environ)
    removed: list[str] = []
    kept: list[str] = []
    for agent in leftovers.agents:
        if is_dead(agent):
            prune_agent(paths, agent.agent_id, removed, kept)
    for temp in leftovers.temps:
        path = Path(temp.path)
        pid = temp_writer_pid(path.name)
        if pid is not None and not pid_alive(pid) and path.parent in (paths.agents, paths.sock, paths.credentials):
            _unlink(path, removed)
    for disp in leftovers.dispatchers:
        if disp.lock_held or not disp.files:
            continue
        directory = paths.root / "bus" / "state" / disp.transport
        lock = FileLock(directory / "dispatcher.lock")
        if not lock.try_acquire():
            kept.append(disp.transport)
            continue
        try:
            for name in ("dispatcher.pid", "wake.sock"):
                _unlink(directory / name, removed)
        finally:
            lock.release()
    for sessions in dict.fromkeys(Path(p.sessions_dir) for p in leftovers.claude_peers):
        removed.extend(str(p) for p in claude_peers.prune(sessions))  # re-checks pid + procStart, ours only
    return PruneResult(tuple(removed), tuple(kept))
