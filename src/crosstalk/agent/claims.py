"""Claims on this agent, handled in the agent's own process.

An agent's journal has exactly one writer, its own process, so a claim travels to the target: the claimer sends an
A2A SendMessage carrying `metadata.crosstalk.op = "claim"` (or "release") under its own bearer token, and the
target's ClaimDesk, in order and one request at a time:

    check the pure rules (policy/claims.py) against the verified sender → journal the claim record (durable)
    → rewrite the descriptor (role worker + owner = the claimer's agent_id, or back to primary)
    → announce it: a notice from crosstalk into its own session, through the receiver chain → answer

The answer is a task: completed (delivery accepted) with `metadata.crosstalk.claim = {"state": "claimed" |
"released", ...}`, or failed with the rule's reason (`self_claim`, `already_claimed`, `worker_cannot_claim`,
`self_release`, `not_claimed`, `not_owner`, `claimer_unknown`) and `claim.state = "rejected"`. The task is an
answer only: it is not kept in the task table (the claim record is the durable fact). A repeated claim by the
current owner is answered `claimed` again (already: true) without a new record or announcement, so a retry after
an unknown outcome is safe.

A claim ends when the target's session ends. A claim is keyed to the target's agent_id, which is a hash of its
session_ref, and it lives in that agent's journal. A new session (a new Claude session id after /clear or a new
start, a new Codex thread) is a new agent_id with a fresh journal, so it starts primary and no claim follows it.
A shim restart or a resume of the same session is the same session, so the claim survives it through journal
replay. Nothing is journaled on close: a closing shim cannot tell a session that ended from one whose shim is
restarting, and a release journaled on every close would drop the claim across a restart of the same session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from crosstalk.core.errors import TaskError
from crosstalk.core.ids import new_message_id
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import Outcome, State
from crosstalk.core.tasks import HistoryEntry, TaskState, TaskView
from crosstalk.journal import JournalError
from crosstalk.journal import records as R
from crosstalk.policy import ClaimState, ReceiverView, Role, claim, release
from crosstalk.policy.errors import ClaimError
from crosstalk.registry.paths import StatePaths

log = logging.getLogger(__name__)

CLAIM, RELEASE = "claim", "release"


class ClaimTarget(Protocol):
    """What the desk needs of the agent it serves (agent/host.py's AgentHost)."""

    @property
    def agent_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def paths(self) -> StatePaths: ...

    @property
    def binding(self) -> dict[str, Any]: ...

    def view(self) -> ReceiverView: ...

    async def record(self, records: list[dict[str, Any]]) -> None: ...

    def republish(self, role: str, owner: str | None) -> bool: ...

    async def notify(self, text: str) -> Outcome: ...


CLAIMED_NOTICE = (
    "{owner} claimed you: you are now its worker; commands from it are allowed. Only {owner} can release you."
)
RELEASED_NOTICE = "{owner} released you: you are a primary again and no agent owns you."


class ClaimDesk:
    """The target side of claim and release for one AgentHost; `handle` is the A2A edge's op handler."""

    def __init__(self, host: ClaimTarget) -> None:
        self.host = host
        self._lock = asyncio.Lock()  # one claim decision at a time: check and journal are one step

    async def handle(self, op: str, sender: Sender, message: Message) -> tuple[TaskView, dict[str, Any]]:
        if op not in (CLAIM, RELEASE):
            raise TaskError(TaskError.INVALID_PARAMS, f"unknown op {op!r}")
        if sender.sender_class is not SenderClass.VERIFIED or not sender.agent_id:
            raise TaskError(TaskError.INVALID, "claims need a verified sender")
        async with self._lock:
            try:
                result = await self._apply(op, sender, message)
            except ClaimError as exc:
                log.info("%s of %s by %s refused: %s", op, self.host.name, sender.agent_id, exc.reason)
                return _answer(op, sender, message, exc.reason), {"claim": {"state": "rejected", "reason": exc.reason}}
            except JournalError as exc:  # nothing changed: the claim was never durable
                raise TaskError(TaskError.INTERNAL, f"the {op} could not be journaled") from exc
        return _answer(op, sender, message, None), {"claim": result}

    def current(self) -> ClaimState:
        view = self.host.view()
        return ClaimState(role=view.role, owner=view.owner)

    async def _apply(self, op: str, sender: Sender, message: Message) -> dict[str, Any]:
        host, requester = self.host, sender.agent_id or ""
        now = self.current()
        if op == CLAIM:
            if now.owner == requester and requester != host.agent_id:
                return {"state": "claimed", "owner": requester, "already": True}  # a retry: nothing changes
            new = claim(now, target_id=host.agent_id, claimer_id=requester, claimer_role=self._role_of(requester))
            rec = R.claim("claimed", requester, sender.name, new.role.value)
            text = CLAIMED_NOTICE.format(owner=sender.name or requester)
        else:
            new = release(now, target_id=host.agent_id, requester_id=requester)
            rec = R.claim("released", None, None, new.role.value)
            rec["released_by"] = requester
            text = RELEASED_NOTICE.format(owner=sender.name or requester)
        rec["binding"] = host.binding
        rec["message_id"] = message.message_id
        await host.record([rec])  # durable before anything else changes or anyone is told
        out: dict[str, Any] = {"state": "claimed" if op == CLAIM else "released", "owner": new.owner}
        # list_agents and the owner's children see the change; if the rewrite fails, the journal still holds the
        # claim and the next registration publishes it from there.
        if not host.republish(new.role.value, new.owner):
            out["descriptor"] = "stale"
        out["announced"] = await self._announce(text)
        return out

    def _role_of(self, agent_id: str) -> Role:
        """The claimer's role as its live descriptor publishes it (workers may not claim)."""
        from crosstalk.registry.discovery import resolve
        from crosstalk.registry.errors import AmbiguousName, NoSuchAgent

        try:
            desc = resolve(self.host.paths, agent_id)
        except (NoSuchAgent, AmbiguousName):
            desc = None
        if desc is None or desc.agent_id != agent_id:
            raise ClaimError("claimer_unknown", f"agent {agent_id} has no live registration")
        try:
            return Role(desc.role)
        except ValueError:
            raise ClaimError("claimer_unknown", f"agent {agent_id} publishes an unknown role {desc.role!r}") from None

    async def _announce(self, text: str) -> str:
        """Tell the session, as a notice from crosstalk through the receiver chain. Returns the delivery state;
        never raises: the claim stands, and the model learns of it from list_agents if not from this."""
        try:
            return (await self.host.notify(text)).state.value
        except Exception as exc:
            log.warning("claim notice to %s not delivered: %s", self.host.name, exc)
            return State.UNKNOWN.value


def _answer(op: str, sender: Sender, message: Message, refusal: str | None) -> TaskView:
    """The task a claim or release is answered with: completed, or failed with the rule's reason."""
    now, task_id = time.time(), new_message_id()
    state = State.REJECTED if refusal else State.ACCEPTED
    return TaskView(
        task_id=task_id,
        context_id=message.context_id or message.message_id,
        creator=sender.agent_id or "",
        kind=op,
        state=TaskState.FAILED if refusal else TaskState.COMPLETED,
        reason=refusal,
        delivery=state.value,
        answer=Outcome(message.message_id, state, refusal, task_id=task_id),
        history=(HistoryEntry(message.message_id, "user", message.text),),
        created_at=now,
        updated_at=now,
    )
