"""Presence across the relay: which live agents each joined machine has, and whether each can be reached.

Each machine's relay process publishes its live agents on `crosstalk.v1.presence.<alias>` (the server's permissions
let it publish only there) every interval and at once when they change, and keeps what it hears from the other
machines in relay/presence.json (0600, replaced whole). The machine a frame speaks for is the subject the server
delivered it on, never the frame: a machine can only ever fill its own entry. Everything heard is capped (bytes per
frame, agents per machine, machines in all) and checked field by field, so a hostile machine cannot grow the file
without bound or put words in another's mouth. A machine that stops announcing (kill -9 of its relay process, a
lost network) is dropped EXPIRY_INTERVALS of its intervals after the last frame heard; one that stops cleanly says
so and is dropped at once. `crosstalk list --all`, list_agents and `crosstalk watch` read the file (read_presence),
and only while this machine's relay process holds its lock: without it nothing here is current.

Pure frames and the book (no NATS); the loop that publishes and listens is relay/presence_loop.py.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.reading import read_capped
from crosstalk.registry.names import is_valid_name
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.config import ALIAS_RE, relay_dir, serve_lock_path
from crosstalk.relay.errors import FrameError

VERSION = 1
PREFIX = "crosstalk.v1.presence"
INTERVAL_S = 5.0  # how often a machine announces its agents when nothing changed
INTERVAL_ENV = "CROSSTALK_RELAY_PRESENCE_S"  # a shorter one for tests (clamped to the bounds below)
MIN_INTERVAL_S = 0.2
MAX_INTERVAL_S = 60.0  # an announced interval is clamped here: no machine lingers more than 3 minutes after death
EXPIRY_INTERVALS = 3  # a machine not heard for this many of its intervals is gone
MAX_FRAME_BYTES = 64 * 1024
MAX_AGENTS = 128  # per machine; more are cut (a frame's first ones kept)
MAX_MACHINES = 64  # machines kept at once; a new one beyond this is not taken until another expires
MAX_HARNESS_CHARS = 24
MAX_REASON_CHARS = 120
MAX_FILE_BYTES = 2 * 1024 * 1024  # above what MAX_MACHINES x MAX_AGENTS of capped fields can fill


def interval_s(environ: Mapping[str, str] = os.environ) -> float:
    raw = environ.get(INTERVAL_ENV)
    try:
        value = float(raw) if raw else INTERVAL_S
    except ValueError:
        value = INTERVAL_S
    return clamp_interval(value)


def clamp_interval(value: float) -> float:
    return min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, value)) if value == value else INTERVAL_S  # NaN: the default


def presence_subject(alias: str) -> str:
    return f"{PREFIX}.{alias}"


def presence_wildcard() -> str:
    """What every machine subscribes to: all machines' announcements (its own is skipped)."""
    return f"{PREFIX}.*"


def alias_of_presence(subject: str) -> str:
    """The announcing machine, from the subject the server delivered on (its permissions tie it to that user)."""
    head, _, alias = subject.rpartition(".")
    if head != PREFIX or not ALIAS_RE.fullmatch(alias):
        raise FrameError(f"not a presence subject: {subject!r}")
    return alias


@dataclass(frozen=True, slots=True)
class RemoteAgent:
    """One live agent of a machine, as little as a listing needs: no path, pid, id or secret leaves the machine."""

    name: str
    harness: str
    reachable: bool
    reason: str | None = None  # why not, when unreachable

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "harness": self.harness, "reachable": self.reachable}
        if self.reason:
            out["reason"] = self.reason
        return out


def _clean_text(value: object, limit: int) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    text = "".join(c if c.isprintable() else " " for c in value[: limit * 2]).strip()
    return text[:limit] or None


def agent_from(raw: object) -> RemoteAgent | None:
    """One announced agent, or None when it is not a well-formed entry (skipped, never guessed at)."""
    if not isinstance(raw, dict):
        return None
    name, harness, reachable = raw.get("name"), raw.get("harness"), raw.get("reachable")
    if not is_valid_name(name) or not isinstance(reachable, bool):
        return None
    kind = _clean_text(harness, MAX_HARNESS_CHARS)
    if kind is None or not kind.replace("-", "").replace("_", "").isalnum():
        return None
    reason = None if reachable else _clean_text(raw.get("reason"), MAX_REASON_CHARS)
    return RemoteAgent(str(name), kind, reachable, reason)


def local_agents(paths: StatePaths) -> tuple[RemoteAgent, ...]:
    """This machine's live agents as it announces them (the registry's word, as `crosstalk list` shows it)."""
    from crosstalk.registry.discovery import list_descriptors

    out = []
    for d in list_descriptors(paths)[:MAX_AGENTS]:
        reachable = d.reachable()
        reason = None if reachable else _clean_text(d.unreachable_reason(), MAX_REASON_CHARS)
        out.append(RemoteAgent(d.name, d.harness[:MAX_HARNESS_CHARS], reachable, reason))
    return tuple(out)


def encode_presence(agents: tuple[RemoteAgent, ...], interval: float, *, gone: bool = False) -> bytes:
    body: dict[str, Any] = {"v": VERSION, "interval": interval, "agents": [a.to_dict() for a in agents]}
    if gone:
        body = {"v": VERSION, "gone": True, "agents": []}
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Announcement:
    agents: tuple[RemoteAgent, ...]
    interval: float
    gone: bool


def decode_presence(data: bytes) -> Announcement:
    if len(data) > MAX_FRAME_BYTES:
        raise FrameError(f"a presence frame of {len(data)} bytes, over {MAX_FRAME_BYTES}")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"not a JSON presence frame: {exc}") from None
    if not isinstance(obj, dict) or obj.get("v") != VERSION:
        raise FrameError("a presence frame is a JSON object of version 1")
    if obj.get("gone") is True:
        return Announcement((), INTERVAL_S, True)
    raw, interval = obj.get("agents"), obj.get("interval")
    if not isinstance(raw, list):
        raise FrameError("a presence frame carries an agents list")
    if not isinstance(interval, int | float) or isinstance(interval, bool):
        raise FrameError("a presence frame says its interval")
    agents: dict[str, RemoteAgent] = {}
    for item in raw[:MAX_AGENTS]:
        agent = agent_from(item)
        if agent is not None:
            agents.setdefault(agent.name, agent)  # a name twice: the first stands
    return Announcement(tuple(agents.values()), clamp_interval(float(interval)), False)


def presence_path(paths: StatePaths) -> Path:
    return relay_dir(paths) / "presence.json"


@dataclass(frozen=True, slots=True)
class Machine:
    agents: tuple[RemoteAgent, ...]
    heard_at: float  # wall clock, for the file's reader
    expires_at: float  # on the book's clock (monotonic: a wall-clock jump neither keeps nor drops a machine)


class PresenceBook:
    """What this machine heard from the others, kept by its relay process and written when it changes."""

    def __init__(self, paths: StatePaths, own_alias: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.paths = paths
        self.own_alias = own_alias
        self.clock = clock
        self.machines: dict[str, Machine] = {}
        self._seq = 0  # each snapshot's number: a slower write of an older one never replaces a newer one
        self._written = 0
        self._writing = threading.Lock()

    def heard(self, alias: str, data: bytes) -> bool:
        """Take one frame delivered on `alias`'s subject. True when what the file shows changed (then write())."""
        if alias == self.own_alias:
            return False
        try:
            ann = decode_presence(data)
        except FrameError:
            return False
        before = self.machines.get(alias)
        if ann.gone:
            return self.machines.pop(alias, None) is not None
        if before is None and len(self.machines) >= MAX_MACHINES:
            return False
        self.machines[alias] = Machine(ann.agents, time.time(), self.clock() + EXPIRY_INTERVALS * ann.interval)
        return before is None or before.agents != ann.agents

    def expire(self) -> bool:
        now = self.clock()
        dead = [alias for alias, m in self.machines.items() if m.expires_at <= now]
        for alias in dead:
            del self.machines[alias]
        return bool(dead)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "alias": self.own_alias,
            "machines": {
                alias: {"heard_at": round(m.heard_at, 3), "agents": [a.to_dict() for a in m.agents]}
                for alias, m in sorted(self.machines.items())
            },
        }

    def snapshot(self) -> tuple[int, bytes]:
        """What the file should say now, numbered (take it where the book changes: the event loop)."""
        self._seq += 1
        return self._seq, (json.dumps(self.to_json()) + "\n").encode()

    def write_snapshot(self, seq: int, data: bytes) -> None:
        """Write a snapshot unless a newer one is already written (safe from worker threads)."""
        with self._writing:
            if seq > self._written:
                atomic_write(presence_path(self.paths), data, mode=0o600)
                self._written = seq

    def write(self) -> None:
        self.write_snapshot(*self.snapshot())

    def clear(self) -> None:
        self.machines.clear()
        with self._writing:
            self._written = self._seq = self._seq + 1  # no older write may land after the removal
        try:
            os.unlink(presence_path(self.paths))
        except FileNotFoundError:
            pass


def read_presence(paths: StatePaths) -> dict[str, tuple[RemoteAgent, ...]]:
    """The other machines' live agents by alias, as this machine's relay process last wrote them; empty when it does
    not run (its lock is free: nothing here would be current) or heard no one. Cheap when not joined: one stat."""
    path = presence_path(paths)
    if not path.exists():
        return {}
    from crosstalk.fs.locks import is_locked

    if not is_locked(serve_lock_path(paths)):
        return {}
    raw = read_capped(path, MAX_FILE_BYTES)  # None: gone meanwhile, unreadable, or over the cap
    try:
        data = json.loads(raw or b"")
    except ValueError:
        return {}
    machines = data.get("machines") if isinstance(data, dict) else None
    if not isinstance(machines, dict):
        return {}
    out: dict[str, tuple[RemoteAgent, ...]] = {}
    for alias, entry in list(machines.items())[:MAX_MACHINES]:
        if not isinstance(alias, str) or not ALIAS_RE.fullmatch(alias) or not isinstance(entry, dict):
            continue
        agents = entry.get("agents")
        found = (agent_from(a) for a in (agents if isinstance(agents, list) else [])[:MAX_AGENTS])
        out[alias] = tuple(a for a in found if a is not None)
    return out


def remote_rows(paths: StatePaths) -> list[dict[str, Any]]:
    """Every other machine's agents as rows named NAME@ALIAS (list --all, list_agents, watch), by alias then name."""
    rows = []
    for alias, agents in sorted(read_presence(paths).items()):
        for a in sorted(agents, key=lambda a: a.name):
            rows.append({**a.to_dict(), "name": f"{a.name}@{alias}", "machine": alias})
    return rows
