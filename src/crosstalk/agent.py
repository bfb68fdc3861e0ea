"""One live agent: registration, journal, receiver chain, uds ingress and its harness adapter, started in the
order of seed 000 §3 and stopped in reverse.

    take the agent and name locks → replay the journal (retention, reconcile) → bind the uds socket and key
    → confirm the harness binding → publish the descriptor

The descriptor is written last, so an agent that others can find is always one that can receive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any

from crosstalk.claims import ClaimDesk
from crosstalk.core.ids import hop_entry
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.harness.base import AgentInfo, Harness
from crosstalk.ingress.uds import UdsIngress
from crosstalk.journal import Journal, JournalState
from crosstalk.journal import records as R
from crosstalk.journal.retention import RETENTION_SECONDS, ids_in, select_retained
from crosstalk.policy import Limits, ReceiverView, Role
from crosstalk.receiver import AgentIdentity, Receiver
from crosstalk.registry.credentials import create_key, remove_key
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import find_by_peer, list_descriptors
from crosstalk.registry.errors import InvalidName, NameHeld
from crosstalk.registry.paths import StatePaths, check_socket_path
from crosstalk.registry.registration import Registration
from crosstalk.tasks.service import TaskService

log = logging.getLogger(__name__)

CHILDREN_CACHE_S = 1.0
RETENTION_INTERVAL_S = 3600.0  # how often a running agent applies the 24 h retention rule to its journal
# The inform route (seed 000 §4/§5, R7): an inform delivered from a verified agent may be answered with the reply
# tool for this long after its delivery. Delivery outcomes that put it into the session (the model may have read
# it): unknown counts, since the Claude adapter cannot confirm an injection; recovered, bounced, rejected and
# unreachable open no route. shim/replying.py enforces the route; open_inbound lists it.
INFORM_ROUTE_TTL_S = 3600.0
ROUTED_STATES = frozenset({State.ACCEPTED, State.QUEUED, State.UNKNOWN})


@dataclass(slots=True)
class AgentConfig:
    harness: Harness
    session_ref: str
    preferred_name: str | None
    cwd: str = field(default_factory=os.getcwd)
    role: Role = Role.PRIMARY
    owner: str | None = None  # agent_id of a parent given at start (a worker launched for an orchestrator)
    peers: tuple[str, ...] = ()
    accept_from: tuple[str, ...] | None = None
    limits: Limits = field(default_factory=Limits)
    harness_pid: int | None = None
    inject_timeout_s: float = 30.0
    retention_interval_s: float = RETENTION_INTERVAL_S
    a2a: bool = False  # serve A2A 1.0 on 127.0.0.1 (imports the SDK: ~0.3 s, paid only by agents that use it)


class AgentHost:
    """A running agent. Create with `await AgentHost.start(paths, config)`; stop with `await host.close()`."""

    def __init__(self, paths: StatePaths, config: AgentConfig, registration: Registration) -> None:
        self.paths = paths
        self.config = config
        self.registration = registration
        self.journal: Journal | None = None
        self.state = JournalState()
        self.receiver: Receiver | None = None
        self.ingress: UdsIngress | None = None
        self.descriptor: Descriptor | None = None
        self.replay_report: dict[str, int] = {}
        self.tasks: TaskService | None = None
        self.claims: ClaimDesk | None = None
        self.a2a: Any = None  # crosstalk.ingress.a2a.server.A2AServer, imported only when enabled
        self._children: tuple[float, frozenset[str]] = (0.0, frozenset())
        self._retention_task: asyncio.Task[None] | None = None

    @property
    def agent_id(self) -> str:
        return self.registration.agent_id

    @property
    def name(self) -> str:
        return self.registration.name

    @classmethod
    async def start(cls, paths: StatePaths, config: AgentConfig) -> AgentHost:
        paths.ensure()
        harness_name = config.harness.name
        registration = Registration.acquire(
            paths,
            harness=harness_name,
            session_ref=config.session_ref,
            preferred_name=config.preferred_name,
            cwd=config.cwd,
        )
        host = cls(paths, config, registration)
        try:
            await host._open()
        except BaseException:
            await host.close()
            raise
        return host

    async def _open(self) -> None:
        paths, agent_id = self.paths, self.agent_id
        uds_path = check_socket_path(paths.uds_path(agent_id))
        bind = R.binding(self.registration.instance_id, self.config.session_ref, None)

        # 1. journal: lock, replay, retention, reconcile — before anything can reach the agent.
        journal, read = Journal.open(paths.journal_file(agent_id), paths.journal_lock(agent_id))
        self.journal = journal
        state = JournalState.replay(read.records)
        kept = select_retained(read.records, state.unresolved_ids())
        if len(kept) < len(read.records):
            journal.rewrite(kept)
            state = JournalState.replay(kept)
        self.state = state
        identity = AgentIdentity(
            agent_id=agent_id, name=self.name, hop_entry=hop_entry(agent_id), binding=bind, reply_address=str(uds_path)
        )
        self.receiver = Receiver(
            identity,
            journal,
            state,
            self.config.harness,
            self.view,
            limits=self.config.limits,
            inject_timeout_s=self.config.inject_timeout_s,
        )
        reconciled = self.receiver.reconcile()
        self.replay_report = {
            "records": len(read.records),
            "dropped_by_retention": len(read.records) - len(kept),
            "torn_tail_bytes": read.torn_tail_bytes,
            "bad_lines": read.bad_lines,
            "reconciled": len(reconciled),
        }

        self.tasks = TaskService(self.receiver)
        self.tasks.load(kept)
        self.claims = ClaimDesk(self)  # claim/release of this agent, arriving as A2A ops (crosstalk/claims.py)

        # 2. the socket and its key; the A2A server and this agent's bearer token.
        token = create_key(paths.key_path(agent_id))
        self.ingress = UdsIngress(
            uds_path, token, self.receiver, lambda pid: find_by_peer(paths, pid), open_messages=self.open_inbound
        )
        await self.ingress.start()
        create_key(paths.token_path(agent_id))
        if self.config.a2a:
            await self._start_a2a()

        # 3. the harness binding.
        info = AgentInfo(
            agent_id=agent_id,
            name=self.name,
            session_ref=self.config.session_ref,
            uds_path=str(uds_path),
            cwd=self.config.cwd,
        )
        bound = await self.config.harness.bind(info)

        # 4. publish: from now on others can find us.
        view = self.view()
        self.descriptor = self.registration.publish(
            uds_path=str(uds_path),
            role=view.role.value,
            owner=view.owner,
            peers=self.config.peers,
            accept_from=self.config.accept_from,
            harness_pid=self.config.harness_pid,
            harness_endpoint=bound.endpoint,
            harness_version=bound.version,
            a2a_url=self.a2a.url if self.a2a is not None else None,
            credential_ref=str(paths.token_path(agent_id)),
        )
        await self.tasks.start()  # resumes tasks a restart interrupted: only now is the harness bound
        self._retention_task = asyncio.create_task(self._retention_loop(), name=f"retention-{agent_id}")

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.retention_interval_s)
            try:
                await self.compact()
            except Exception:  # retention must never take the agent down; the next round tries again
                log.exception("journal retention failed")

    async def compact(self, *, now: float | None = None) -> tuple[int, int]:
        """Apply the retention rule to the live journal and forget in memory what it dropped.
        Returns (records before, records after)."""
        assert self.journal is not None
        now = time.time() if now is None else now
        unresolved = self.state.unresolved_ids()
        kept_ids: set[str] = set()

        def select(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
            kept = select_retained(records, unresolved, now=now)
            kept_ids.update(ids_in(kept))
            return kept

        before, after = await asyncio.wrap_future(self.journal.compact(select))
        if after < before:
            self.state.prune(kept_ids, now - RETENTION_SECONDS)
            if self.tasks is not None:
                self.tasks.prune(kept_ids, now - RETENTION_SECONDS)
        return before, after

    async def _start_a2a(self) -> None:
        from crosstalk.ingress.a2a.server import A2AServer
        from crosstalk.registry.bearer import BearerDirectory

        bearer = BearerDirectory(self.paths)

        def authenticate(token: str) -> Sender | None:
            desc = bearer.lookup(token)
            return Sender(SenderClass.VERIFIED, desc.agent_id, desc.name, "a2a") if desc else None

        assert self.tasks is not None
        self.a2a = A2AServer(
            name=self.name,
            description=f"crosstalk agent {self.name} ({self.config.harness.name} session): messages sent here "
            "arrive inside the live session.",
            tasks=self.tasks,
            authenticate=authenticate,
            to=self.name,
            ops=self.claims.handle if self.claims is not None else None,
        )
        await self.a2a.start()

    def open_inbound(self, *, inform_window_s: float = INFORM_ROUTE_TTL_S) -> list[dict[str, str]]:
        """Inbound messages the session may still answer with the reply tool, newest first: asks whose reply is
        owed, and informs from verified agents delivered within the last hour (their reply route)."""
        now = time.time()
        rows: list[tuple[float, dict[str, str]]] = []
        for mid, entry in self.state.messages.items():
            if entry.native or (entry.sender or {}).get("class") != "verified":
                continue
            kind = entry.message.get("kind") or "inform"
            delivered = entry.state in ROUTED_STATES
            fresh = entry.outcome_ts is not None and now - entry.outcome_ts < inform_window_s
            if (kind == "ask" and self.state.reply_owed(mid)) or (kind == "inform" and delivered and fresh):
                name = entry.sender.get("name") or entry.sender.get("agent_id") or "?"
                rows.append((entry.ts, {"message_id": mid, "from": str(name), "kind": kind}))
        return [row for _, row in sorted(rows, key=lambda r: r[0], reverse=True)]

    def rename(self, new_name: str) -> bool:
        """Follow a harness rename (seed 000 §3): the new alias is taken under its lock, the descriptor rewritten,
        the old alias released. agent_id, socket, journal, tasks, claims and routes are unchanged. False when the
        name is held by another live agent or is not a valid name (the agent keeps its current name)."""
        if new_name == self.name:
            return True
        try:
            self.registration.rename(new_name)
        except (NameHeld, InvalidName):
            return False
        self.descriptor = self.registration.descriptor
        if self.receiver is not None:
            self.receiver.identity = replace(self.receiver.identity, name=new_name)
        if self.a2a is not None:
            self.a2a.rename(new_name)
        return True

    def view(self) -> ReceiverView:
        """What the policy needs to know about this agent, current as of this message."""
        role, owner = self.config.role, self.config.owner
        claim = self.state.claim
        if claim is not None:
            role = Role(claim.get("role", "primary"))
            owner = claim.get("owner") if claim.get("action") == "claimed" else None
        return ReceiverView(
            agent_id=self.agent_id,
            name=self.name,
            role=role,
            owner=owner,
            children=self._child_ids(),
            peers=frozenset(self.config.peers),
            accept_from=frozenset(self.config.accept_from) if self.config.accept_from is not None else None,
        )

    def _child_ids(self) -> frozenset[str]:
        at, ids = self._children
        now = time.monotonic()
        if now - at > CHILDREN_CACHE_S:
            ids = frozenset(d.agent_id for d in list_descriptors(self.paths) if d.owner == self.agent_id)
            self._children = (now, ids)
        return ids

    async def close(self) -> None:
        """Stop in reverse: unpublish, close the socket, drop the key, close the journal, release the locks."""
        if self._retention_task is not None:
            self._retention_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._retention_task
            self._retention_task = None
        if self.a2a is not None:
            with contextlib.suppress(Exception):
                await self.a2a.close()
            self.a2a = None
        if self.ingress is not None:
            await self.ingress.close()
            self.ingress = None
        if self.tasks is not None:
            await self.tasks.close()
        with contextlib.suppress(FileNotFoundError):
            remove_key(self.paths.token_path(self.agent_id))
        with contextlib.suppress(Exception):
            await self.config.harness.close()
        with contextlib.suppress(FileNotFoundError):
            remove_key(self.paths.key_path(self.agent_id))
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        self.registration.close()
