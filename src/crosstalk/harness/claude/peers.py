"""Claude-visible peers (opt-in: `crosstalk install claude --native-peers`): a crosstalk agent that is not a Claude
session is published as a native Claude peer, so Claude's own ListAgents lists it and its SendMessage reaches it
with no crosstalk tool at all.

A peer is what Claude 2.1.332 reads for one of its own sessions (HARNESSES.md): a registry record
`<config>/sessions/<pid>.json` naming the agent and its messaging socket (the agent's own uds socket: its ingress
takes Claude's native frame), and a key `<pid>.<sha256(socket)>.key` (0600). The pid is the agent's process, so
one process publishes one peer (a second agent of the same process is not published). The record carries
`entrypoint: "crosstalk-peer"`, so only crosstalk's own records are ever removed: on close, and at the next
publication on this machine when the publisher's pid and procStart no longer name a live process (a crash).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.fs.reading import read_capped
from crosstalk.harness.base import AgentInfo
from crosstalk.harness.claude.sessions import is_live, parse_record

ENTRYPOINT = "crosstalk-peer"
VERSION = "2.1.332"  # the Claude Code version whose record format this is
MAX_RECORD_BYTES = 256 * 1024


def _pid_domain() -> str:
    machine = (read_capped("/etc/machine-id", 4096) or b"").decode().strip()
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = ""
    return f"linux:{machine}:{ns}"


def key_path(sessions: Path, pid: int, socket_path: str) -> Path:
    return sessions / f"{pid}.{hashlib.sha256(socket_path.encode()).hexdigest()}.key"


def prune(sessions: Path) -> list[Path]:
    """Remove crosstalk's own peer records (and keys) whose publisher is gone; nothing else is touched."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(sessions))
    except OSError:
        return removed
    for entry in entries:
        stem, _, ext = entry.name.partition(".")
        if ext != "json" or not stem.isdigit():
            continue
        raw = read_capped(entry.path, MAX_RECORD_BYTES)
        record = parse_record(raw) if raw else None
        if record is None or record.get("entrypoint") != ENTRYPOINT or is_live(record, int(stem)):
            continue
        socket_path = record.get("messagingSocketPath")
        for path in (
            Path(entry.path),
            key_path(sessions, int(stem), socket_path if isinstance(socket_path, str) else ""),
        ):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
    return removed


def publish(config_dir: Path, agent: AgentInfo, token: str, pid: int | None = None) -> Callable[[], None] | None:
    """Publish `agent` as a Claude peer, its key holding `token` (the agent's socket key: a session that presents
    it is let in); returns how to unpublish it, or None when this process already has a record (one peer per
    process) or its start time cannot be read."""
    pid = os.getpid() if pid is None else pid
    started = proc_start_time(pid)
    sessions = config_dir / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    prune(sessions)
    record_path = sessions / f"{pid}.json"
    if started is None or record_path.exists():
        return None
    now = int(time.time() * 1000)
    domain = _pid_domain()
    key = key_path(sessions, pid, agent.uds_path)
    atomic_write(key, json.dumps({"peerToken": token, "procStart": started, "pidDomain": domain}).encode(), mode=0o600)
    record = {
        "pid": pid, "sessionId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"crosstalk:{agent.agent_id}")),
        "cwd": agent.cwd, "startedAt": now, "procStart": started, "version": VERSION, "peerProtocol": 1,
        "peerFeatures": [], "kind": "interactive", "entrypoint": ENTRYPOINT, "pidDomain": domain,
        "messagingSocketPath": agent.uds_path, "name": agent.name, "nameSource": "crosstalk", "nameSince": now,
        "status": "idle", "updatedAt": now, "statusUpdatedAt": now,
    }  # fmt: skip
    atomic_write(record_path, json.dumps(record).encode(), mode=0o600)

    def unpublish() -> None:
        for path in (record_path, key):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    return unpublish


def config_dir_of(settings: Mapping[str, str]) -> Path | None:
    value = settings.get("config_dir")
    return Path(value) if value else None
