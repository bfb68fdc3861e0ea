"""One agent registration's lifetime, in this order: agent lock, name lock, publish, rename, close.

Both locks are taken first and held until close; every descriptor write happens while they are held, and
close removes the descriptor only if it is still this instance's, so a loser or a late exit path can never
delete the descriptor of the registration that replaced it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import TracebackType

from crosstalk.core.ids import agent_id_for, new_message_id
from crosstalk.core.message import utc_now_iso
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.registry.descriptor import Descriptor, read_descriptor, write_descriptor
from crosstalk.registry.errors import AgentAlreadyRegistered, NameHeld, RegistryError
from crosstalk.registry.names import candidate_names, is_valid_name, validate_name
from crosstalk.registry.paths import StatePaths

# Listings probe agent locks (is_locked) and sweeps hold them for a moment; a newcomer retries this long
# before it concludes that a live registration owns the agent. Name locks are never probed: no grace needed.
AGENT_LOCK_GRACE_SECONDS = 0.1


def claim_first_name(paths: StatePaths, names: Iterable[str]) -> tuple[str, FileLock, list[str]]:
    """Take the first name whose lock is free: (name, its held lock, the names found held before it)."""
    held: list[str] = []
    for name in names:
        lock = FileLock(paths.name_lock(name))
        if lock.try_acquire():
            return name, lock, held
        held.append(name)  # a held flock means a live holder: the kernel drops it when the holder dies
    raise RegistryError(f"every candidate name is held by a live agent: {', '.join(held) or '(none given)'}")


class Registration:
    """Use Registration.acquire(...) to create one; close() (or the with block) ends it."""

    def __init__(
        self,
        paths: StatePaths,
        *,
        agent_id: str,
        harness: str,
        session_ref: str,
        cwd: str,
        name: str,
        agent_lock: FileLock,
        name_lock: FileLock,
        name_notice: str | None = None,
    ) -> None:
        self.paths = paths
        self.agent_id = agent_id
        self.harness = harness
        self.session_ref = session_ref
        self.cwd = cwd
        self.name = name
        self.name_notice = name_notice
        self.instance_id = new_message_id()
        self.descriptor: Descriptor | None = None
        self._agent_lock = agent_lock
        self._name_lock = name_lock
        self._closed = False

    @classmethod
    def acquire(
        cls,
        paths: StatePaths,
        *,
        harness: str,
        session_ref: str,
        preferred_name: str | None = None,
        cwd: str,
    ) -> Registration:
        """Take the agent lock (held → AgentAlreadyRegistered), then the first free candidate name."""
        paths.ensure()
        agent_id = agent_id_for(harness, session_ref)
        agent_lock = FileLock(paths.agent_lock(agent_id))
        if not agent_lock.try_acquire(AGENT_LOCK_GRACE_SECONDS):
            raise AgentAlreadyRegistered(agent_id, _holder_hint(paths, agent_id))
        try:
            # No name of its own: the one this agent had before a crash (a session renamed by inheritance, `/clear`,
            # keeps it across a restarted shim), when nobody took it meanwhile.
            previous = None if preferred_name else read_descriptor(paths.descriptor(agent_id))
            candidates = candidate_names(preferred_name or (previous.name if previous else None), harness, cwd,
                                         agent_id)  # fmt: skip
            name, name_lock, held = claim_first_name(paths, candidates)
        except BaseException:
            agent_lock.release()
            raise
        return cls(
            paths,
            agent_id=agent_id,
            harness=harness,
            session_ref=session_ref,
            cwd=cwd,
            name=name,
            agent_lock=agent_lock,
            name_lock=name_lock,
            name_notice=_name_notice(preferred_name, held, name),
        )

    @property
    def closed(self) -> bool:
        return self._closed

    def build_descriptor(
        self,
        *,
        uds_path: str | None = None,
        role: str = "primary",
        owner: str | None = None,
        peers: tuple[str, ...] = (),
        accept_from: tuple[str, ...] | None = None,
        harness_pid: int | None = None,
        harness_started_at: str | None = None,
        a2a_url: str | None = None,
        harness_endpoint: str | None = None,
        harness_version: str | None = None,
        inbound_reachable: bool = True,
        inbound_reason: str | None = None,
        credential_ref: str | None = None,
    ) -> Descriptor:
        """A descriptor for this registration, served by the current process."""
        pid = os.getpid()
        started_at = proc_start_time(pid)
        if started_at is None:
            raise RegistryError(f"cannot read the start time of pid {pid} from /proc")
        if harness_pid is not None and harness_started_at is None:
            harness_started_at = proc_start_time(harness_pid)
        return Descriptor(
            agent_id=self.agent_id,
            name=self.name,
            harness=self.harness,
            role=role,
            owner=owner,
            peers=tuple(peers),
            accept_from=None if accept_from is None else tuple(accept_from),
            pid=pid,
            started_at=started_at,
            harness_pid=harness_pid,
            harness_started_at=harness_started_at,
            cwd=self.cwd,
            session_ref=self.session_ref,
            a2a_url=a2a_url,
            uds_path=uds_path if uds_path is not None else str(self.paths.uds_path(self.agent_id)),
            instance_id=self.instance_id,
            harness_endpoint=harness_endpoint,
            harness_version=harness_version,
            inbound_reachable=inbound_reachable,
            inbound_reason=inbound_reason,
            credential_ref=credential_ref,
            registered_at=utc_now_iso(),
        )

    def publish(self, descriptor: Descriptor | None = None, /, **fields: object) -> Descriptor:
        """Write the descriptor (given, or built from fields) atomically; only while the locks are held."""
        self._check_open()
        if descriptor is None:
            descriptor = self.build_descriptor(**fields)  # type: ignore[arg-type]
        elif fields:
            raise TypeError("publish() takes a descriptor or descriptor fields, not both")
        mine = (self.agent_id, self.instance_id, self.name)
        theirs = (descriptor.agent_id, descriptor.instance_id, descriptor.name)
        if theirs != mine:
            raise RegistryError(f"descriptor (agent_id, instance_id, name) {theirs} is not this registration's {mine}")
        write_descriptor(self.paths, descriptor)
        self.descriptor = descriptor
        return descriptor

    def rename(self, new_name: str) -> None:
        """Take new_name's lock (held → NameHeld), rewrite the descriptor, then release the old name."""
        self._check_open()
        validate_name(new_name)
        if new_name == self.name:
            return
        new_lock = FileLock(self.paths.name_lock(new_name))
        if not new_lock.try_acquire():
            raise NameHeld(new_name)
        try:
            if self.descriptor is not None:
                renamed = self.descriptor.with_(name=new_name)
                write_descriptor(self.paths, renamed)
                self.descriptor = renamed
        except BaseException:
            new_lock.release()
            raise
        old_lock, self._name_lock = self._name_lock, new_lock
        self.name = new_name
        self.name_notice = None
        old_lock.release()

    def close(self) -> None:
        """Remove the descriptor if it is still ours, then release the name and agent locks. Idempotent."""
        if self._closed:
            return
        # Terminal first: a publish or rename that resumes after this point must not resurrect the descriptor.
        self._closed = True
        try:
            path = self.paths.descriptor(self.agent_id)
            current = read_descriptor(path)
            if current is not None and current.instance_id == self.instance_id:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
        finally:
            try:
                self._name_lock.release()
            finally:
                self._agent_lock.release()  # last: removal happened under it

    def _check_open(self) -> None:
        if self._closed:
            raise RegistryError(f"registration of agent {self.agent_id} ({self.name!r}) is closed")

    def __enter__(self) -> Registration:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Registration(agent_id={self.agent_id!r}, name={self.name!r}, {state})"


def _name_notice(preferred: str | None, held: list[str], name: str) -> str | None:
    """The sentence the model is told when it did not get the name it would normally have."""
    if preferred and not is_valid_name(preferred):
        return f"the name {preferred!r} is not a valid agent name; registered as {name!r}"
    if not held:
        return None
    return f"the name {held[0]!r} is held by a live agent; registered as {name!r}"


def _holder_hint(paths: StatePaths, agent_id: str) -> str | None:
    desc = read_descriptor(paths.descriptor(agent_id))
    return None if desc is None else f"name {desc.name!r}, pid {desc.pid}"
