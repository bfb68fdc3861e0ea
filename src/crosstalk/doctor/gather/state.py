"""The state root's paths and their modes, and what is left in it: every agent's files with the evidence of
whether its registration lives (pid + start time from its descriptor, and its agent lock), writers' temp files,
each dispatcher's pid file and wake socket with whether its lock is held, and the native Claude peer records of
crosstalk agents that are gone. Reading never creates anything."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from crosstalk.core import untrusted
from crosstalk.core.ids import is_agent_id
from crosstalk.doctor.facts import (
    AgentLeftovers,
    ClaudePeerLeftover,
    DispatcherLeftovers,
    Leftovers,
    PathMode,
    StateRoot,
    TempLeftover,
)
from crosstalk.fs.atomic import temp_writer_pid
from crosstalk.fs.locks import is_locked
from crosstalk.fs.procinfo import is_same_process, pid_alive
from crosstalk.fs.reading import read_capped
from crosstalk.harness.claude.peers import ENTRYPOINT, MAX_RECORD_BYTES, key_path
from crosstalk.harness.claude.sessions import is_live, parse_record, sessions_dir
from crosstalk.registry.descriptor import read_descriptor
from crosstalk.registry.paths import StatePaths

MAX_ENTRIES = 20000  # a state root with more files is read only this far
_SECRET_SUFFIXES = (".key", ".cred")
_AGENT_FILES = (("agents", ".json"), ("sock", ".sock"), ("sock", ".key"), ("credentials", ".cred"))


def _mode(path: Path, kind: str, my_uid: int) -> PathMode | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return PathMode(str(path), kind, stat.S_IMODE(st.st_mode), st.st_uid, my_uid, stat.S_ISLNK(st.st_mode))


def gather_state(paths: StatePaths) -> StateRoot:
    root = paths.root
    if not root.is_dir():
        return StateRoot(str(root), False)
    my_uid = os.geteuid()
    entries: list[PathMode] = []
    seen = 0
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(directory) / d).is_symlink()]
        here = Path(directory)
        found = _mode(here, "dir", my_uid)
        if found is not None:
            entries.append(found)
        for name in filenames:
            seen += 1
            if seen > MAX_ENTRIES:
                return StateRoot(str(root), True, tuple(entries))
            kind = "secret" if name.endswith(_SECRET_SUFFIXES) else "file"
            mode = _mode(here / name, kind, my_uid)
            if mode is not None and (kind == "secret" or mode.is_symlink or mode.uid != my_uid or mode.mode & 0o022):
                entries.append(mode)  # ordinary files are listed only when something is wrong with them
        for name in dirnames:
            if (here / name).is_symlink():
                mode = _mode(here / name, "dir", my_uid)
                if mode is not None:
                    entries.append(mode)
    return StateRoot(str(root), True, tuple(entries))


def _names(directory: Path) -> list[str]:
    try:
        with os.scandir(directory) as it:
            return [e.name for e in it][:MAX_ENTRIES]
    except OSError:
        return []


def agent_leftovers(paths: StatePaths) -> tuple[AgentLeftovers, ...]:
    files: dict[str, list[str]] = {}
    for sub, suffix in _AGENT_FILES:
        for name in _names(paths.root / sub):
            stem = name[: -len(suffix)]
            if name.endswith(suffix) and is_agent_id(stem):
                files.setdefault(stem, []).append(str(paths.root / sub / name))
    out = []
    for agent_id, found in sorted(files.items()):
        desc = read_descriptor(paths.descriptor(agent_id))
        if desc is not None and desc.agent_id != agent_id:
            desc = None  # a file under the wrong name is not evidence
        try:
            held = is_locked(paths.agent_lock(agent_id))
        except OSError:
            held = True  # cannot tell: treat as alive
        pid = desc.pid if desc else None
        out.append(
            AgentLeftovers(
                agent_id=agent_id,
                name=desc.name if desc else None,
                pid=pid,
                started_at=desc.started_at if desc else None,
                same_process=desc is not None and is_same_process(desc.pid, desc.started_at),
                pid_alive=pid is not None and pid_alive(pid),
                lock_held=held,
                files=tuple(sorted(found)),
                instance_id=desc.instance_id if desc else None,
            )
        )
    return tuple(out)


def temp_leftovers(paths: StatePaths) -> tuple[TempLeftover, ...]:
    out = []
    for directory in (paths.agents, paths.sock, paths.credentials):
        for name in _names(directory):
            pid = temp_writer_pid(name)
            if pid is not None:
                out.append(TempLeftover(str(directory / name), pid, pid_alive(pid)))
    return tuple(out)


def dispatcher_leftovers(paths: StatePaths) -> tuple[DispatcherLeftovers, ...]:
    base = paths.root / "bus" / "state"
    out = []
    for name in sorted(_names(base)):
        directory = base / name
        if not directory.is_dir() or directory.is_symlink():
            continue
        present = tuple(str(directory / f) for f in ("dispatcher.pid", "wake.sock") if (directory / f).exists())
        try:
            held = is_locked(directory / "dispatcher.lock")
        except OSError:
            held = True
        out.append(DispatcherLeftovers(name, held, present))
    return tuple(out)


def peer_dirs(paths: StatePaths, environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The Claude session directories crosstalk may have published peers into: this environment's, and the one
    `crosstalk install claude --native-peers` recorded."""
    dirs = [sessions_dir(environ)]
    settings = read_capped(paths.native_peers / "claude.json", 64 * 1024)
    with contextlib.suppress(ValueError):
        data = untrusted.loads(settings, what="native peers settings", max_bytes=64 * 1024) if settings else None
        chosen = data.get("config_dir") if isinstance(data, dict) else None
        if isinstance(chosen, str) and chosen:
            dirs.append(Path(chosen) / "sessions")
    return tuple(dict.fromkeys(dirs))


def claude_peer_leftovers(dirs: tuple[Path, ...]) -> tuple[ClaudePeerLeftover, ...]:
    out = []
    for sessions in dirs:
        for name in sorted(_names(sessions)):
            stem, _, ext = name.partition(".")
            if ext != "json" or not stem.isdigit():
                continue
            raw = read_capped(sessions / name, MAX_RECORD_BYTES)
            record = parse_record(raw) if raw else None
            if record is None or record.get("entrypoint") != ENTRYPOINT or is_live(record, int(stem)):
                continue
            socket = record.get("messagingSocketPath")
            key = key_path(sessions, int(stem), socket if isinstance(socket, str) else "")
            files = tuple(str(f) for f in (sessions / name, key) if f.exists())
            label = record.get("name")
            out.append(ClaudePeerLeftover(str(sessions), int(stem), label if isinstance(label, str) else None, files))
    return tuple(out)


def gather_leftovers(paths: StatePaths, environ: Mapping[str, str]) -> Leftovers:
    return Leftovers(
        agent_leftovers(paths),
        temp_leftovers(paths),
        dispatcher_leftovers(paths),
        claude_peer_leftovers(peer_dirs(paths, environ)),
    )
