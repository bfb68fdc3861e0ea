"""reply to an inbound inform: the inform route.

An inform delivered into this agent's session from a verified agent opens a route back to that agent for
INFORM_ROUTE_TTL_S (1 h), counted from its delivery: the journal's first `outcome` record for it, so the window
survives a restart. A reply goes back as an inform with in_reply_to = the inform's message_id, through the same
path as an ask's answer (ShimRouter._forward). One reply per inbound message: the reply is journaled in this
agent's journal (records.inform_reply, an `obligation` record closed from the start) before it is sent, so a repeat
with the same text returns the first result and sends nothing, and different text is `already_replied`, after a
restart too. A message the git bus brought routes back to its channel instead (a channel message re: it; no
verified sender, no expiry). Asks keep their own path (tasks.reply completes the task and closes its route).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from crosstalk.agent import INFORM_ROUTE_TTL_S, ROUTED_STATES, AgentHost
from crosstalk.core.ids import new_message_id
from crosstalk.core.states import State
from crosstalk.journal import MessageEntry
from crosstalk.journal import records as R

UNDELIVERED = frozenset({"rejected", "unreachable"})
UNDELIVERED_HINT = (
    "your reply reached no one (see forwarded); it counts as this message's one reply: tell the sender with "
    "send_message if it still matters"
)
# A failed bus write is journaled as the reply's result like any other, so a retry returns it: the hint must not
# promise that retrying helps.
BUS_UNSENT_HINT = (
    "your reply could not be written to the bus (see forwarded); it counts as this message's one reply: tell your "
    "user if it still matters"
)

Forward = Callable[[AgentHost, str, str, str, str], Awaitable[dict[str, Any]]]


DELIVERY_SETTLE_S = 5.0  # how long a reply waits for its message's delivery outcome
SETTLE_POLL_S = 0.01


def now() -> float:
    """The clock inform routes are measured on (a seam for tests)."""
    return time.time()


async def delivery_settled(host: AgentHost, message_id: str, timeout: float = DELIVERY_SETTLE_S) -> None:
    """Wait, at most `timeout`, while `message_id` is still being delivered (claimed, no outcome yet). The session
    sees a message as soon as the harness write lands, before its outcome is journaled: a reply that fast (a quick
    model, a loaded machine) would find no route open yet and be refused as no_such_message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entry = host.state.messages.get(message_id)
        if entry is None or entry.state is not State.DISPATCHING:
            return
        await asyncio.sleep(SETTLE_POLL_S)


def is_inform_reply(host: AgentHost, message_id: str) -> bool:
    """Whether `reply(message_id)` takes the inform route: an inbound inform this agent's journal holds, unless the
    receiving side said it would answer it as a task (expect_answer), which tasks.reply serves; and an ask another
    machine's agent sent across the relay (no task here: its answer goes back as an inform re: it, the way its
    asker waits for it, shim/relay_sends.py)."""
    entry = host.state.messages.get(message_id)
    if entry is None:
        return False
    kind = entry.message.get("kind") or "inform"
    task = host.task_holding(message_id)
    if kind == "ask":
        return task is None and relayed_ask(entry)
    return kind == "inform" and (task is None or not task.awaiting)


def relayed_ask(entry: MessageEntry) -> bool:
    """An ask the relay brought from another machine's agent (answered on the inform route, one reply)."""
    return entry.message.get("kind") == "ask" and _from_relay(entry) is not None


def relayed_ask_owed(host: AgentHost, entry: MessageEntry) -> bool:
    """A relayed ask delivered here, not yet replied to and not past its deadline: the session owes it its one
    reply."""
    if not relayed_ask(entry) or entry.state not in ROUTED_STATES or relayed_ask_closed(entry):
        return False
    prior = host.state.obligations.get(entry.message_id)
    return prior is None or not prior.get("reply_id")


def relayed_ask_closed(entry: MessageEntry) -> bool:
    """Whether a relayed ask's deadline passed here. Kept as a same-machine ask's task keeps it (tasks/ledger.py
    `expire`): counted from when this machine received it (its `received` record, as a task's from its creation),
    so it holds across restarts with no timer; past it no reply is owed and a reply is `ask_closed`."""
    deadline = entry.message.get("deadline_seconds")
    return isinstance(deadline, int) and deadline > 0 and now() >= entry.ts + deadline


def _refuse(reason: str, message_id: str) -> dict[str, Any]:
    return {"state": "rejected", "reason": reason, "message_id": message_id}


def _route_problem(host: AgentHost, entry: MessageEntry, *, bus: bool = False, relayed: bool = False) -> str | None:
    """Why no route leads back from `entry`, or None when one is open. A bus message's route is the channel it
    came from: its sender is the repository's word, not a verified agent, and the channel never expires. A message
    the relay brought from another machine's agent (`@relay:ALIAS/NAME`, a tag only this machine's relay process may
    give, ingress/uds.py) routes back to NAME@ALIAS across the relay, within the same hour as a local sender's."""
    if entry.state.value == "bounced":
        return "no_such_message"  # a native frame from this agent's own session: a bounce opens no route
    sender = entry.sender
    if not bus and not relayed and (sender.get("class") != "verified" or not sender.get("agent_id")):
        return "sender_unverified"
    if entry.state not in ROUTED_STATES:  # (recovered informs: no_such_message, the operator's ruling)
        return "no_such_message"
    bind = host.binding
    mine = entry.binding or {}
    if mine.get("session_ref") != bind.get("session_ref") or mine.get("endpoint") != bind.get("endpoint"):
        return "no_such_message"  # delivered into another conversation: never routed from this one
    opened = entry.outcome_ts if entry.outcome_ts is not None else entry.ts
    if not bus and now() - opened > INFORM_ROUTE_TTL_S:
        return "route_expired"
    return None


class InformReplies:
    """The inform half of the reply tool for one shim: a lock per (agent, inbound message) so two concurrent
    replies to one inform cannot both send."""

    def __init__(self, resolve: Callable[[str], Any], forward: Forward) -> None:
        self._resolve = resolve  # agent_id → Descriptor, or the model-facing answer (dict) when it is gone
        self._forward = forward
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def reply(self, host: AgentHost, message_id: str, text: str) -> dict[str, Any]:
        key = (host.agent_id, message_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                return await self._reply(host, message_id, text)
        finally:
            if not lock.locked() and self._locks.get(key) is lock:
                del self._locks[key]

    async def _reply(self, host: AgentHost, message_id: str, text: str) -> dict[str, Any]:
        entry = host.state.messages.get(message_id)
        prior = host.state.obligations.get(message_id)
        if prior is not None and prior.get("kind") == "inform" and prior.get("reply_id"):
            if prior.get("text") != text:
                return _refuse("already_replied", message_id)
            if isinstance(prior.get("result"), dict):
                return dict(prior["result"])  # the first result; nothing is sent again
            # Journaled but its result is not: a crash (or a refused write) between the two records. Send the same
            # reply_id again; the receiver dedupes it, so the sender's session gets it once (the bus is
            # at-least-once: there a second copy of the reply may land).
            route = self._route(host, message_id, entry, str(prior.get("to_agent")))
            return await self._send(host, message_id, prior["reply_id"], text, route)
        if entry is None:
            return _refuse("no_such_message", message_id)
        if relayed_ask(entry) and relayed_ask_closed(entry):
            # As a same-machine ask past its deadline (ReplyError.ASK_CLOSED): nothing is sent, and the journal
            # says why the ask closed, once.
            if prior is None or prior.get("state") != "closed":
                await _journal(host, obligation_closed(message_id))
            return _refuse("ask_closed", message_id)
        bus = _from_bus(entry)
        relayed = None if bus else _from_relay(entry)
        problem = _route_problem(host, entry, bus=bus, relayed=relayed is not None)
        if problem is not None:
            return _refuse(problem, message_id)
        to = str(entry.sender.get("name") if bus else relayed or entry.sender["agent_id"])
        # gone: nothing is spent, a later retry may find it back
        if not bus and not relayed and isinstance(self._resolve(to), dict):
            return {
                "state": "unreachable",
                "reason": "sender_gone",
                "in_reply_to": message_id,
                "hint": "the sender is no longer registered; your reply was not sent and you may retry it later",
            }
        reply_id = new_message_id()
        if not await _journal(host, R.inform_reply(message_id, reply_id, text, to)):
            return {"state": "unreachable", "reason": "journal_failed", "in_reply_to": message_id}
        return await self._send(host, message_id, reply_id, text, self._route(host, message_id, entry, to))

    def _route(self, host: AgentHost, message_id: str, entry: MessageEntry | None, to: str) -> _Route:
        """The way back to `to` (the recipient journaled with the reply): the bus channel a bus message came from,
        else its verified sender, as an ask's answer travels (ShimRouter._forward)."""
        if entry is not None and _from_bus(entry):
            context = str(entry.message.get("context_id"))
            return _Route(to, lambda _reply_id, text: _publish(host, to, context, text), BUS_UNSENT_HINT)
        if entry is not None and _from_relay(entry):
            from crosstalk.shim.relay_sends import reply_over_relay

            def across(reply_id: str, text: str) -> Awaitable[dict[str, Any]]:
                return reply_over_relay(host, to, reply_id, message_id, text)

            return _Route(to, across, UNDELIVERED_HINT)
        return _Route(to, lambda reply_id, text: self._forward(host, to, reply_id, message_id, text), UNDELIVERED_HINT)

    async def _send(self, host: AgentHost, message_id: str, reply_id: str, text: str, route: _Route) -> dict[str, Any]:
        forwarded = await route.carry(reply_id, text)
        result: dict[str, Any] = {"state": "replied", "message_id": reply_id, "in_reply_to": message_id}
        result["forwarded"] = forwarded
        if forwarded.get("state") in UNDELIVERED or forwarded.get("reason") == "asker_gone":
            result["hint"] = route.unsent_hint
        await _journal(host, R.inform_reply(message_id, reply_id, text, route.to, result))
        return dict(result)


@dataclass(frozen=True, slots=True)
class _Route:
    """Where a reply to one inbound inform goes: `to` is journaled with the reply (the sender's agent_id, or a bus
    sender's tag), `carry(reply_id, text)` sends it and returns what its transport answered, and `unsent_hint`
    tells the model when that answer says the reply reached no one."""

    to: str
    carry: Callable[[str, str], Awaitable[dict[str, Any]]]
    unsent_hint: str


def _from_bus(entry: MessageEntry) -> bool:
    """Whether the bus bridge delivered `entry`: an external sender tagged `@bus:…`, in a bus context."""
    if entry.sender.get("class") != "external":
        return False  # decided before the import: the bus (PyYAML, git helpers) loads only for a possible bus message
    from crosstalk.bus.live.bridge import parse_context, parse_sender_tag

    return (
        parse_sender_tag(entry.sender.get("name")) is not None
        and parse_context(entry.message.get("context_id")) is not None
    )


def _from_relay(entry: MessageEntry) -> str | None:
    """NAME@ALIAS when the relay brought `entry` from another machine's agent (an external sender tagged
    `@relay:ALIAS/NAME`), else None."""
    name = entry.sender.get("name")
    if entry.sender.get("class") != "external" or not isinstance(name, str) or not name.startswith("@relay:"):
        return None
    from crosstalk.relay.wire import relayed_agent

    found = relayed_agent(name)
    return f"{found[0]}@{found[1]}" if found else None


async def _publish(host: AgentHost, tag: str, context_id: str, text: str) -> dict[str, Any]:
    """A reply to a message that came over the git bus: a channel message re: it (crosstalk.bus.live.bridge)."""
    from crosstalk.bus.live.bridge import reply_from_live

    return await asyncio.to_thread(reply_from_live, host.paths, host.name, tag, context_id, text)


def obligation_closed(message_id: str) -> dict[str, Any]:
    """The `obligation` record a same-machine ask's deadline writes (tasks/table.py), for a relayed ask: no task."""
    return {"type": R.OBLIGATION, "ts": round(time.time(), 6), "message_id": message_id, "task_id": None,
            "state": "closed", "reason": "deadline_passed"}  # fmt: skip


async def _journal(host: AgentHost, rec: dict[str, Any]) -> bool:
    try:
        await host.record([rec])
    except Exception:
        return False
    return True
