"""The agent descriptor: agents/<agent_id>.json, published atomically, read forgivingly.

A descriptor holds where and who an agent is, never a secret: credential_ref is a path to the 0600 token file.
"""

from __future__ import annotations

import os

from crosstalk.core import untrusted
from crosstalk.core.ids import is_agent_id, is_message_id
from crosstalk.core.record import Record
from crosstalk.fs.reading import read_capped
from crosstalk.registry.errors import RegistryError
from crosstalk.registry.names import is_valid_name

# `typing` and `pathlib` are only needed by type checkers; importing them costs ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from crosstalk.registry.paths import StatePaths

PROTOCOL = 1
MAX_DESCRIPTOR_BYTES = 64 * 1024


class Descriptor(Record):
    """A Record (core/record.py), not a dataclass: `crosstalk send` reads descriptors on its start-up path. Every field
    is given by keyword."""

    _fields = (
        "agent_id", "name", "harness", "role", "owner", "peers", "accept_from", "pid", "started_at", "harness_pid",
        "harness_started_at", "cwd", "session_ref", "a2a_url", "uds_path", "instance_id", "harness_endpoint",
        "harness_version", "inbound_reachable", "inbound_reason", "credential_ref", "registered_at", "protocol",
    )  # fmt: skip
    __slots__ = _fields
    agent_id: str
    name: str
    harness: str
    role: str
    owner: str | None  # agent_id of the claiming parent
    peers: tuple[str, ...]
    accept_from: tuple[str, ...] | None
    pid: int  # the process that serves this agent (the shim)
    started_at: str  # kernel start time of pid: pid + started_at survive pid reuse
    harness_pid: int | None
    harness_started_at: str | None
    cwd: str
    session_ref: str
    a2a_url: str | None
    uds_path: str
    instance_id: str  # uuidv7, new per registration: cleanup removes only its own instance's file
    harness_endpoint: str | None
    harness_version: str | None
    # What binding to the harness session learned (harness.base.BindResult): whether a message put into this agent
    # can reach its session, and why not. list_agents and `crosstalk list` derive `reachable` from these.
    inbound_reachable: bool
    inbound_reason: str | None
    credential_ref: str | None
    registered_at: str
    protocol: int

    def __init__(
        self,
        *,
        agent_id: str,
        name: str,
        harness: str,
        role: str = "primary",
        owner: str | None = None,
        peers: tuple[str, ...] = (),
        accept_from: tuple[str, ...] | None = None,
        pid: int,
        started_at: str,
        harness_pid: int | None = None,
        harness_started_at: str | None = None,
        cwd: str,
        session_ref: str,
        a2a_url: str | None = None,
        uds_path: str,
        instance_id: str,
        harness_endpoint: str | None = None,
        harness_version: str | None = None,
        inbound_reachable: bool = True,
        inbound_reason: str | None = None,
        credential_ref: str | None = None,
        registered_at: str,
        protocol: int = PROTOCOL,
    ) -> None:
        self._set(
            agent_id, name, harness, role, owner, peers, accept_from, pid, started_at, harness_pid,
            harness_started_at, cwd, session_ref, a2a_url, uds_path, instance_id, harness_endpoint, harness_version,
            inbound_reachable, inbound_reason, credential_ref, registered_at, protocol,
        )  # fmt: skip

    def served_by(self, pid: int, started_at: str) -> bool:
        """Whether process (pid, kernel start time) is this agent's shim or its harness session: how a socket peer
        is matched to an agent (start times make a reused pid a different process)."""
        return (pid, started_at) in ((self.pid, self.started_at), (self.harness_pid, self.harness_started_at))

    def reachable(self) -> bool:
        """Whether a message sent to this agent can be delivered into its session now: its harness binding says
        inbound delivery works, and its socket (which takes sessions' task frames and `crosstalk send`) is there."""
        return self.inbound_reachable and bool(self.uds_path) and os.path.exists(self.uds_path)

    def unreachable_reason(self) -> str:
        """Why reachable() is false, in words a listing shows (list_agents, `crosstalk watch`)."""
        if not self.inbound_reachable:
            return self.inbound_reason or "its harness binding cannot deliver into the session"
        return "its socket is gone"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in self._fields}
        out["peers"] = list(self.peers)
        out["accept_from"] = None if self.accept_from is None else list(self.accept_from)
        return out

    @classmethod
    def from_dict(cls, data: object) -> Descriptor:
        """Validate and build; RegistryError names the bad field. Unknown fields are ignored."""
        if not isinstance(data, dict):
            raise RegistryError(f"descriptor must be a JSON object, got {type(data).__name__}")
        agent_id = _req_str(data, "agent_id")
        if not is_agent_id(agent_id):
            raise RegistryError(f"descriptor field 'agent_id': not 16 lowercase hex: {agent_id!r}")
        name = _req_str(data, "name")
        if not is_valid_name(name):
            raise RegistryError(f"descriptor field 'name': not a valid agent name: {name!r}")
        instance_id = _req_str(data, "instance_id")
        if not is_message_id(instance_id):
            raise RegistryError(f"descriptor field 'instance_id': not a UUID: {instance_id!r}")
        owner = _opt_str(data, "owner")
        if owner is not None and not is_agent_id(owner):
            raise RegistryError(f"descriptor field 'owner': not an agent_id: {owner!r}")
        return cls(
            agent_id=agent_id,
            name=name,
            harness=_req_str(data, "harness"),
            role=_opt_str(data, "role") or "primary",
            owner=owner,
            peers=_str_tuple(data, "peers") or (),
            accept_from=_str_tuple(data, "accept_from"),
            pid=_req_pid(data, "pid"),
            started_at=_req_str(data, "started_at"),
            harness_pid=_opt_pid(data, "harness_pid"),
            harness_started_at=_opt_str(data, "harness_started_at"),
            cwd=_req_str(data, "cwd"),
            session_ref=_req_str(data, "session_ref"),
            a2a_url=_opt_str(data, "a2a_url"),
            uds_path=_req_str(data, "uds_path"),
            instance_id=instance_id,
            harness_endpoint=_opt_str(data, "harness_endpoint"),
            harness_version=_opt_str(data, "harness_version"),
            inbound_reachable=_bool(data, "inbound_reachable", True),
            inbound_reason=_opt_str(data, "inbound_reason"),
            credential_ref=_opt_str(data, "credential_ref"),
            registered_at=_req_str(data, "registered_at"),
            protocol=_int(data, "protocol", PROTOCOL),
        )


def _bad(key: str, problem: str) -> RegistryError:
    return RegistryError(f"descriptor field {key!r}: {problem}")


def _req_str(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if value is None:
        raise _bad(key, "is required")
    if not isinstance(value, str) or not value:
        raise _bad(key, f"must be a non-empty string, got {value!r}")
    return value


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    return None if data.get(key) is None else _req_str(data, key)


def _int(data: dict[str, Any], key: str, default: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):  # JSON true is a bool, and bool is an int
        raise _bad(key, f"must be an integer, got {value!r}")
    return value


def _bool(data: dict[str, Any], key: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise _bad(key, f"must be true or false, got {value!r}")
    return value


def _req_pid(data: dict[str, Any], key: str) -> int:
    if data.get(key) is None:
        raise _bad(key, "is required")
    pid = _int(data, key, 0)
    if pid <= 0:
        raise _bad(key, f"must be a positive pid, got {pid}")
    return pid


def _opt_pid(data: dict[str, Any], key: str) -> int | None:
    return None if data.get(key) is None else _req_pid(data, key)


def _str_tuple(data: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _bad(key, "must be a list of non-empty strings")
    return tuple(value)


def write_descriptor(paths: StatePaths, desc: Descriptor) -> Path:
    """Publish desc atomically: a reader sees the previous descriptor or this one, never a partial file."""
    import json  # here, as the next: `crosstalk send` only reads descriptors

    from crosstalk.fs.atomic import atomic_write

    path = paths.descriptor(desc.agent_id)
    data = json.dumps(desc.to_dict(), indent=2, ensure_ascii=False).encode("utf-8") + b"\n"
    atomic_write(path, data, mode=0o600)
    return path


def read_descriptor(path: Path | str) -> Descriptor | None:
    """The descriptor at path, or None if missing or unreadable: one bad file never breaks a listing."""
    raw = read_capped(path, MAX_DESCRIPTOR_BYTES)
    if raw is None:
        return None
    try:
        return Descriptor.from_dict(untrusted.loads(raw, what=str(path), max_bytes=MAX_DESCRIPTOR_BYTES))
    except (ValueError, RegistryError):  # UntrustedInput (not JSON, too deep) is a ValueError
        return None
