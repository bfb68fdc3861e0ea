"""One live agent: registration, journal, receiver chain, uds ingress and its harness adapter, started in the
order below (each step needs the one before) and stopped in reverse.

    take the agent and name locks → replay the journal (retention, reconcile) → bind the uds socket and key
    → confirm the harness binding → publish the descriptor (with what the binding learned)

The descriptor is written last, so an agent that others can find is always one that can receive. The shim, the
CLI, the extension host (exthost/) and the claim desk use the narrow methods below, never the parts inside.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar

from crosstalk.agent.claims import ClaimDesk
from crosstalk.agent.compaction import Compactor
from crosstalk.agent.config import AgentConfig
from crosstalk.agent.edges import a2a_endpoint
from crosstalk.agent.peers import publish_native_peers
from crosstalk.agent.routes import INFORM_ROUTE_TTL_S, open_inbound
from crosstalk.agent.session import session_ops
from crosstalk.core.errors import CrosstalkError
from crosstalk.core.ids import hop_entry
from crosstalk.core.states import Outcome
from crosstalk.core.tasks import TaskView
from crosstalk.harness.base import AgentInfo, BindResult, SessionModel
from crosstalk.ingress.uds import UdsIngress
from crosstalk.ingress.uds_tasks import TaskDesk
from crosstalk.journal import Journal, JournalState
from crosstalk.journal import records as R
from crosstalk.journal.retention import Plan, compact_records
from crosstalk.policy import ReceiverView, Role
from crosstalk.receiver import AgentIdentity, Listener, Receiver
from crosstalk.registry.bearer import BearerDirectory
from crosstalk.registry.credentials import create_key, remove_key
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import find_by_peer, list_descriptors, recorded_endpoints, registry_stamp
from crosstalk.registry.errors import InvalidName, NameHeld
from crosstalk.registry.paths import StatePaths, check_socket_path
from crosstalk.registry.registration import Registration
from crosstalk.tasks.service import TaskService
from crosstalk.tasks.table import TaskEntry

log = logging.getLogger(__name__)

CHILDREN_CACHE_S = 1.0


class AgentHost:
    """A running agent. Create with `await AgentHost.start(paths, config)`; stop with `await host.close()`."""

    def __init__(self, paths: StatePaths, config: AgentConfig, registration: Registration) -> None:
        self.paths = paths
        self.config = config
        self.registration = registration
        self.state = JournalState()
        self.replay_report: dict[str, int] = {}
        self.inbound = BindResult(inbound_reachable=False, reason="not bound yet")  # what bind learned
        self._journal: Journal | None = None
        self._receiver: Receiver | None = None
        self._tasks: TaskService | None = None
        self._ingress: UdsIngress | None = None
        self._claims: ClaimDesk | None = None
        self._a2a: Any = None  # crosstalk.ingress.a2a.lazy.LazyA2AServer: the SDK loads on the first A2A client
        self._bearers: BearerDirectory | None = None
        self._children: tuple[float, frozenset[str], tuple[int, int] | None] = (0.0, frozenset(), None)
        self._compactor: Compactor | None = None  # the journal kept bounded while the agent runs
        self._unpublish: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ who and where
    @property
    def agent_id(self) -> str:
        return self.registration.agent_id

    @property
    def name(self) -> str:
        return self.registration.name

    @property
    def name_notice(self) -> str | None:
        """Why the agent did not get the name it asked for, if it did not."""
        return self.registration.name_notice

    @property
    def harness_name(self) -> str:
        return self.config.harness.name

    @property
    def harness_pid(self) -> int | None:
        """The session's own process, where its harness has one per session (Claude)."""
        return self.config.harness_pid

    @property
    def descriptor(self) -> Descriptor | None:
        return self.registration.descriptor

    @property
    def uds_path(self) -> str:
        return str(self.paths.uds_path(self.agent_id))

    @property
    def a2a_url(self) -> str | None:
        return self._a2a.url if self._a2a is not None else None

    @property
    def binding(self) -> dict[str, Any]:
        """The conversation this agent's records are bound to (journal `binding`)."""
        return self.receiver.identity.binding

    # ------------------------------------------------------------------ the parts (started, never None)
    @property
    def journal(self) -> Journal:
        return _started(self._journal, "journal")

    @property
    def receiver(self) -> Receiver:
        return _started(self._receiver, "receiver")

    @property
    def tasks(self) -> TaskService:
        return _started(self._tasks, "task service")

    # ------------------------------------------------------------------ narrow operations
    async def record(self, records: list[dict[str, Any]]) -> None:
        """Journal records durably, then apply them to the agent's state. Raises JournalError."""
        await self.receiver.record(records)

    async def notify(self, text: str, *, in_reply_to: str | None = None) -> Outcome:
        """Tell this agent's own session something, as crosstalk, through the receiver chain."""
        return await self.receiver.notify(text, in_reply_to=in_reply_to)

    def add_listener(self, fn: Listener) -> None:
        """fn(inbound, outcome) once per message this agent receives, whatever the ingress."""
        self.receiver.add_listener(fn)

    def task_holding(self, message_id: str) -> TaskEntry | None:
        """The task that holds an inbound message, if it came as one (A2A)."""
        return self.tasks.table.holding(message_id)

    async def reply(self, message_id: str, text: str) -> TaskView:
        """The session answers the task holding `message_id` (tasks.TaskService.reply; raises its ReplyError)."""
        return await self.tasks.reply(message_id, text)

    def open_inbound(self, *, inform_window_s: float = INFORM_ROUTE_TTL_S) -> list[dict[str, str]]:
        """Inbound messages the session may still answer with the reply tool, newest first (agent/routes.py)."""
        return open_inbound(self.state, time.time(), inform_window_s=inform_window_s)

    # ------------------------------------------------------------------ start
    @classmethod
    async def start(cls, paths: StatePaths, config: AgentConfig) -> AgentHost:
        paths.ensure()
        registration = Registration.acquire(
            paths,
            harness=config.harness.name,
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
        paths, agent_id, adapter = self.paths, self.agent_id, self.config.harness
        uds_path = check_socket_path(paths.uds_path(agent_id))
        info = AgentInfo(
            agent_id=agent_id, name=self.name, session_ref=self.config.session_ref, uds_path=str(uds_path),
            cwd=self.config.cwd,
        )  # fmt: skip

        # 1. journal: lock, replay, retention, reconcile — before anything can reach the agent.
        journal, read = Journal.open(paths.journal_file(agent_id), paths.journal_lock(agent_id))
        self._journal = journal
        state = JournalState.replay(read.records, max_settled=self.config.max_settled)
        kept = compact_records(read.records, Plan.of(state))
        if len(kept) < len(read.records):
            journal.rewrite(kept)
            state = JournalState.replay(kept, max_settled=self.config.max_settled)
        else:
            kept = read.records
        self.state = state
        compacted_size = journal.size
        identity = AgentIdentity(
            agent_id=agent_id,
            name=self.name,
            hop_entry=hop_entry(agent_id),
            binding=R.binding(self.registration.instance_id, self.config.session_ref, None),
            reply_address=adapter.native_reply_address(info),
        )
        self._receiver = Receiver(
            identity,
            journal,
            state,
            adapter,
            self.view,
            limits=self.config.limits,
            inject_timeout_s=self.config.inject_timeout_s,
            open_messages=self.open_inbound,
        )
        reconciled = self._receiver.reconcile()
        self.replay_report = {
            "records": len(read.records),
            "dropped_by_retention": len(read.records) - len(kept),
            "torn_tail_bytes": read.torn_tail_bytes,
            "bad_lines": read.bad_lines,
            "reconciled": len(reconciled),
        }
        self._tasks = TaskService(self._receiver)
        self._tasks.load(kept)
        self._compactor = Compactor(
            journal, state, self._tasks, interval_s=self.config.retention_interval_s,
            after_bytes=self.config.compact_after_bytes, compacted_size=compacted_size, name=f"retention-{agent_id}",
        )  # fmt: skip
        self._receiver.add_listener(self._compactor.on_message)
        self._claims = ClaimDesk(self)  # claim/release of this agent, arriving as A2A ops (agent/claims.py)

        # 2. the socket and its key; the A2A server and this agent's bearer token.
        token = create_key(paths.key_path(agent_id))
        # Every agent serves tasks on its socket: how crosstalk's own agents reach it (task frames,
        # ingress/uds_tasks.py), without loading the A2A SDK in either process; with or without an A2A endpoint.
        desk = TaskDesk(self._tasks, self._bearer().lookup, self._claims.handle)
        self._ingress = UdsIngress(
            uds_path, token, self._receiver, lambda pid: find_by_peer(paths, pid), desk, relay_root=paths.root
        )
        await self._ingress.start()
        create_key(paths.token_path(agent_id))
        if self.config.a2a:
            await self._start_a2a()

        # 3. the harness binding (told where this harness's other agents are bound); an adapter that plays its
        # session's model answers through the task service.
        others = [d for d in list_descriptors(paths) if d.agent_id != agent_id]
        known = tuple(recorded_endpoints(others).get(adapter.name, ()))
        self.inbound = await adapter.bind(replace(info, known_endpoints=known))
        if isinstance(adapter, SessionModel):
            via = self.config.session_reply
            adapter.attach_session(session_ops(self.tasks, (lambda mid, text: via(self, mid, text)) if via else None))

        # 4. publish: from now on others can find us, with what the binding learned.
        view = self.view()
        self.registration.publish(
            uds_path=str(uds_path),
            role=view.role.value,
            owner=view.owner,
            peers=self.config.peers,
            accept_from=self.config.accept_from,
            harness_pid=self.config.harness_pid,
            harness_endpoint=self.inbound.endpoint,
            harness_version=self.inbound.version,
            inbound_reachable=self.inbound.inbound_reachable,
            inbound_reason=self.inbound.reason,
            a2a_url=self.a2a_url,
            credential_ref=str(paths.token_path(agent_id)),
        )
        self._unpublish = publish_native_peers(self.paths, self.harness_name, info, token)  # opt-in (agent/peers.py)
        await self._tasks.start()  # resumes tasks a restart interrupted: only now is the harness bound
        self._compactor.start()

    async def _start_a2a(self) -> None:
        """The A2A endpoint: its port bound and published now, the SDK loaded when a client first connects."""
        ops = self._claims.handle if self._claims is not None else None
        self._a2a = a2a_endpoint(self.name, self.harness_name, self.tasks, self._bearer(), ops)
        await self._a2a.start()

    def _bearer(self) -> BearerDirectory:
        """The live agents' bearer tokens, shared by the A2A edge and the socket's task frames."""
        if self._bearers is None:
            self._bearers = BearerDirectory(self.paths)
        return self._bearers

    # ------------------------------------------------------------------ while running
    async def compact(self, *, now: float | None = None) -> tuple[int, int]:
        """Apply the retention rule to the live journal now (agent/compaction.py): (records before, after)."""
        return await _started(self._compactor, "journal upkeep").compact(now=now)

    def rename(self, new_name: str) -> bool:
        """Follow a harness rename: the new alias is taken under its lock, the descriptor rewritten,
        the old alias released. agent_id, socket, journal, tasks, claims and routes are unchanged. False when the
        name is held by another live agent or is not a valid name (the agent keeps its current name)."""
        if new_name == self.name:
            return True
        try:
            self.registration.rename(new_name)
        except (NameHeld, InvalidName):
            return False
        if self._receiver is not None:
            self._receiver.identity = replace(self._receiver.identity, name=new_name)
        if self._a2a is not None:
            self._a2a.rename(new_name)
        return True

    def republish(self, role: str, owner: str | None) -> bool:
        """Rewrite the descriptor with a new role and owner (a claim changed). False if it could not be."""
        desc = self.registration.descriptor
        if desc is None or self.registration.closed:
            return desc is None  # not yet published: the first publish reads view()
        try:
            self.registration.publish(desc.with_(role=role, owner=owner))
        except (CrosstalkError, OSError):
            log.exception("could not rewrite the descriptor of %s after a claim change", self.name)
            return False
        return True

    # ------------------------------------------------------------------ whom it hears (an extension host sets these)
    def set_role(self, role: Role) -> None:
        """Take `role`: acceptFrom goes back to the role's defaults and only a worker keeps its owner. The
        descriptor is rewritten with the new role."""
        self.config.role, self.config.accept_from = role, None
        if role is not Role.WORKER:
            self.config.owner = None
        self.republish(role.value, self.config.owner)

    def set_owner(self, owner: str | None) -> None:
        """The agent_id this agent works for (a worker's parent); the descriptor is rewritten with it."""
        self.config.owner = owner
        self.republish(self.config.role.value, owner)

    def set_peers(self, peers: Iterable[str]) -> None:
        """The agents this one hears as peers (names or agent_ids), from the next message on."""
        self.config.peers = tuple(peers)

    def set_accept_from(self, entries: Iterable[str] | None) -> None:
        """Whom this agent accepts messages from (buckets, names, @scheme:topic tags); None: its role's defaults."""
        self.config.accept_from = None if entries is None else tuple(entries)

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
        at, ids, stamp = self._children
        now = time.monotonic()
        if now - at > CHILDREN_CACHE_S:
            # Reread only when a descriptor changed since (registry_stamp): not once per message seconds apart.
            fresh = registry_stamp(self.paths)
            if fresh is None or fresh != stamp:
                ids = frozenset(d.agent_id for d in list_descriptors(self.paths) if d.owner == self.agent_id)
            self._children = (now, ids, fresh)
        return ids

    # ------------------------------------------------------------------ stop
    async def close(self) -> None:
        """Stop in reverse: unpublish, close the socket, drop the key, close the journal, release the locks."""
        for undo in self._unpublish:
            with contextlib.suppress(Exception):
                undo()
        self._unpublish = []
        if self._compactor is not None:
            await self._compactor.stop()
        if self._a2a is not None:
            with contextlib.suppress(Exception):
                await self._a2a.close()
            self._a2a = None
        if self._ingress is not None:
            await self._ingress.close()
            self._ingress = None
        if self._tasks is not None:
            await self._tasks.close()
        with contextlib.suppress(FileNotFoundError):
            remove_key(self.paths.token_path(self.agent_id))
        with contextlib.suppress(Exception):
            await self.config.harness.close()
        with contextlib.suppress(FileNotFoundError):
            remove_key(self.paths.key_path(self.agent_id))
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        self.registration.close()


T = TypeVar("T")


def _started(part: T | None, what: str) -> T:
    if part is None:
        raise RuntimeError(f"the agent's {what} is not running (the agent is not started, or closed)")
    return part
