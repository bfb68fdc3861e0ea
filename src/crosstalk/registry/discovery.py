"""Live agents from the descriptor directory: list, resolve a name, identify a peer pid.

`crosstalk doctor --fix` (doctor/prune.py) removes what a dead registration left.

A descriptor is live only when its process is running with the recorded start time (pid reuse) AND its agent
lock is held (the registration has not ended). Reading never creates files or directories.
"""

from __future__ import annotations

import os
import time

from crosstalk.core.ids import is_agent_id
from crosstalk.fs.errors import NotRegularFile
from crosstalk.fs.locks import is_locked
from crosstalk.fs.procinfo import is_same_process, is_same_process_kept, proc_start_time
from crosstalk.registry.descriptor import Descriptor, read_descriptor
from crosstalk.registry.errors import AgentLockUnusable, AmbiguousName, NoSuchAgent

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from crosstalk.registry.paths import StatePaths

_SUFFIX = ".json"
SETTLED_NS = 1_000_000_000  # a stamp is trusted once its mtimes are this old (file-system timestamp granularity)


def registry_stamp(paths: StatePaths) -> tuple[int, int] | None:
    """The agents' and credentials' directories' mtimes, which change whenever a descriptor or token is written (by
    rename) or removed; None while either changed within the last second (a second change in the same timestamp
    tick would leave them equal) or cannot be read. Equal stamps: the registry's files are as they were."""
    try:
        # The strings, not the Path properties: `crosstalk send` resolves a name without importing pathlib.
        stamp = os.stat(paths.agents_dir()).st_mtime_ns, os.stat(paths.credentials_dir()).st_mtime_ns
    except OSError:
        return None
    return stamp if time.time_ns() - max(stamp) > SETTLED_NS else None


def _descriptor_files(paths: StatePaths) -> Iterator[tuple[str, str]]:
    """(agent_id, path) of every agents/<agent_id>.json; other files there are not descriptors."""
    try:
        entries = os.scandir(paths.agents_dir())
    except (FileNotFoundError, NotADirectoryError):
        return
    with entries:
        for entry in entries:
            stem = entry.name[: -len(_SUFFIX)]
            if entry.name.endswith(_SUFFIX) and is_agent_id(stem):
                yield stem, entry.path


def _read_all(paths: StatePaths) -> Iterator[Descriptor]:
    for agent_id, path in _descriptor_files(paths):
        desc = read_descriptor(path)
        if desc is not None and desc.agent_id == agent_id:  # a file under the wrong name is not trusted
            yield desc


_SETTLED: dict[str, tuple[tuple[int, int], list[Descriptor]]] = {}  # agents dir → (its stamp, descriptors read)


def _read_settled(paths: StatePaths) -> list[Descriptor]:
    """Every descriptor, read again only when the registry changed since the last read (registry_stamp): a sending
    shim resolves a name per message, and its peers' descriptors rarely change. Liveness is never cached."""
    stamp = registry_stamp(paths)
    where = str(paths.agents_dir())
    hit = _SETTLED.get(where)
    if stamp is not None and hit is not None and hit[0] == stamp:
        return hit[1]
    found = list(_read_all(paths))
    if stamp is not None:
        if len(_SETTLED) > 16:
            _SETTLED.clear()
        _SETTLED[where] = (stamp, found)
    return found


def is_live(paths: StatePaths, desc: Descriptor, *, kept: bool = False) -> bool:
    """Its process runs and its agent lock is held. A lock path that is not a regular file (a FIFO, a device, a
    directory or a symlink planted there) proves nothing: not live (lock_problem says why). `kept`: a long-lived
    caller asking per message keeps a pidfd on the process (procinfo.is_same_process_kept), one poll a check."""
    same = is_same_process_kept if kept else is_same_process
    if not same(desc.pid, desc.started_at):  # cheap /proc read (or poll) first
        return False
    try:
        return is_locked(paths.agent_lock_file(desc.agent_id))
    except OSError:
        return False


def lock_problem(paths: StatePaths, desc: Descriptor) -> str | None:
    """Why a descriptor whose process runs cannot be proven live: its lock path cannot be probed (None otherwise)."""
    if not is_same_process(desc.pid, desc.started_at):
        return None
    try:
        is_locked(paths.agent_lock_file(desc.agent_id))
    except OSError as exc:
        return (
            str(exc) if isinstance(exc, NotRegularFile) else f"{paths.agent_lock_file(desc.agent_id)}: {exc.strerror}"
        )
    return None


def list_descriptors(paths: StatePaths, *, include_stale: bool = False) -> list[Descriptor]:
    """Live descriptors (all of them with include_stale), sorted by name then agent_id."""
    found = [d for d in _read_all(paths) if include_stale or is_live(paths, d)]
    return sorted(found, key=lambda d: (d.name, d.agent_id))


def recorded_endpoints(descs: Iterable[Descriptor]) -> dict[str, list[str]]:
    """Harness name -> the harness endpoints its agents are bound to, as their descriptors record them (each once):
    a kind that finds sessions by asking endpoints asks these too."""
    found: dict[str, list[str]] = {}
    for d in descs:
        if d.harness_endpoint and d.harness_endpoint not in found.setdefault(d.harness, []):
            found[d.harness].append(d.harness_endpoint)
    return found


def resolve(paths: StatePaths, name_or_agent_id: str, *, kept: bool = False) -> Descriptor:
    """The live agent with this agent_id, else the one live agent with this name. A 16-hex target is an agent_id
    only: no name has that shape, so a down agent's id never reaches another agent. `kept`: as for is_live."""
    if is_agent_id(name_or_agent_id):
        desc = read_descriptor(paths.descriptor_file(name_or_agent_id))
        if desc is not None and desc.agent_id == name_or_agent_id and is_live(paths, desc, kept=kept):
            return desc
        _raise_lock_problem(paths, name_or_agent_id, [desc] if desc is not None else [])
        raise NoSuchAgent(name_or_agent_id, desc.pid if desc is not None else None)
    named = [d for d in _read_settled(paths) if d.name == name_or_agent_id or d.agent_id == name_or_agent_id]
    matches = [d for d in named if d.name == name_or_agent_id and is_live(paths, d, kept=kept)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        _raise_lock_problem(paths, name_or_agent_id, [d for d in named if d.name == name_or_agent_id])
        raise NoSuchAgent(name_or_agent_id, named[0].pid if named else None)
    matches.sort(key=lambda d: d.agent_id)
    raise AmbiguousName(name_or_agent_id, [(d.agent_id, d.name, d.harness, d.cwd) for d in matches])


def _raise_lock_problem(paths: StatePaths, target: str, descs: list[Descriptor]) -> None:
    """An agent whose process runs but whose lock path is planted is not "gone": say what is wrong with it."""
    for d in descs:
        problem = lock_problem(paths, d)
        if problem is not None:
            raise AgentLockUnusable(target, d.pid, problem)


def find_by_peer(paths: StatePaths, pid: int) -> Descriptor | None:
    """The one live descriptor served by, or hosting, process pid; None for zero or several matches.

    A pooled shim serves several agents from one pid: such a peer is never attributed by picking the first.
    """
    started_at = proc_start_time(pid)
    if started_at is None:
        return None
    # The descriptors as last read while the registry is unchanged (a one-off sender's pid is asked about once per
    # message); liveness is checked every time.
    matches = [d for d in _read_settled(paths) if d.served_by(pid, started_at) and is_live(paths, d)]
    return matches[0] if len(matches) == 1 else None
