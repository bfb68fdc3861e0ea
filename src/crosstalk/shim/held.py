"""Sends the receiving session holds for its user: the sending model is told the final word, without asking for it.

A send answered `held` is journaled in the sending agent's journal (a `held_send` record: to whom, and the target
agent's task when the target is a crosstalk agent), then watched until it settles:
- to a crosstalk agent, the target journals each transition and moves the message's task; this shim reads that
  task (GetTask, as a task frame on the target's socket: shim/sending.py; every POLL_S) until its delivery is no
  longer held;
- to a session without crosstalk, the harness tells the process that wrote the message (Claude's receipts,
  harness/claude/receipts.py; Qwen's, harness/qwen/receipts.py): the final word comes to this shim on a reader
  thread. Qwen also says when a message it answered `delivered` (queued) was lost unread (`expired`: the session
  exited first; `misaddressed`): the sending session is told that too, the same way.
The final word is journaled first (the `held_send` record, settled), then told to the sending session as a notice
from crosstalk (a short inform through its receiver chain), and the record is marked notified. After a restart the
watches resume from the journal: a target agent's task still answers; a native session's receipts went to the old
process, so those are settled unknown, saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from crosstalk.agent import AgentHost
from crosstalk.core.states import State
from crosstalk.harness.base import InjectResult
from crosstalk.journal import records as R
from crosstalk.registry.paths import StatePaths

log = logging.getLogger(__name__)

POLL_S = 1.0
QUEUED_WATCH_S = 600.0  # how long a queued native send's later loss is told (harness/qwen/receipts.LATE_WINDOW_S)
GONE_AFTER = 10  # failed reads of the target's task in a row before it counts as gone
NATIVE_LOST = (
    "the session without crosstalk tells only the process that wrote the message what its user did, and that "
    "process (this agent's earlier crosstalk) has ended"
)
TARGET_GONE = "the receiving agent ended while its session held the message"


PENDING = (State.HELD.value, State.QUEUED.value)  # a watched send waits in one of these until its final word
WAS = {State.HELD.value: "held for its user", State.QUEUED.value: "queued for its model"}


def notice(message_id: str, to: str, state: str, reason: str | None, was: str = WAS[State.HELD.value]) -> str:
    """What the sending session reads when a held message (or a queued one: lost later, or its hand-over told
    later) settles."""
    head = f"crosstalk: your message {message_id} to {to}, {was},"
    if state == State.ACCEPTED.value:
        return f"{head} was delivered{f' ({reason})' if was == WAS[State.QUEUED.value] and reason else ''}."
    if state == State.QUEUED.value:
        return f"{head} was delivered: {reason or 'queued for its model'}"
    return f"{head} was not delivered ({state}): {reason or 'no reason given'}"


class HeldSends:
    """The held sends of one shim's agents, watched until each settles."""

    def __init__(self, paths: StatePaths, client_for: Any) -> None:
        """`client_for(host, target) -> client | None`: the sending agent's task client for a target agent
        (shim/sending.py: its socket's task frames, or A2A)."""
        self.paths = paths
        self.client_for = client_for
        self._tasks: set[asyncio.Task[None]] = set()
        self._journaled: dict[str, asyncio.Event] = {}  # native message id → set once its held record is durable
        self._queued: dict[str, float] = {}  # native message id answered queued → when (a later loss is told)

    # ------------------------------------------------------------------ starting a watch
    async def held_by_agent(self, host: AgentHost, message_id: str, to: str, to_agent: str, result: Any) -> None:
        """A send to crosstalk agent `to_agent` was answered held (or queued, with the hand-over told later:
        `settles`): journal it, then watch its task."""
        task_id, state = str(result["task_id"]), str(result["state"])
        rec = R.held_send(message_id, state, None, to=to, to_agent=to_agent, task_id=task_id)
        try:
            await host.record([rec])
        except Exception:
            log.exception("could not journal the held send %s", message_id)
        self._spawn(self._watch_task(host, message_id, to, to_agent, task_id))

    async def send_native(
        self, host: AgentHost, to: str, text: str, sessions: list[tuple[Any, Any]], kind: str, environ: Any
    ) -> dict[str, Any]:
        """A send to a live session crosstalk does not serve (a Claude session started without it; `sessions`: the
        route's), written natively as its own peers write, inform only, and watched when held. The sending session's
        real permission mode is asserted."""
        from crosstalk.core.ids import new_message_id
        from crosstalk.ingress.client import deliver_native

        mid = new_message_id()
        out = await asyncio.to_thread(
            deliver_native, self.paths, to, text, sessions, kind=kind, from_name=host.name,
            sender_pid=host.harness_pid, environ=environ, message_id=mid,
            on_settled=self.native_callback(host, mid, to),
        )  # fmt: skip
        await self.held_native(host, mid, to, out.state.value, out.reason)
        hint = "the session's user decides; crosstalk tells you here when it is delivered or not"
        return out.answer(to=to, hint=hint if out.state is State.HELD else None)

    def native_callback(self, host: AgentHost, message_id: str, to: str) -> Any:
        """`on_settled` for a native delivery: the harness's later word, handed to the event loop."""
        loop = asyncio.get_running_loop()
        self._journaled[message_id] = asyncio.Event()

        def settled(mid: str, result: InjectResult) -> None:
            if result.state is State.HELD or loop.is_closed():
                return
            loop.call_soon_threadsafe(self._spawn, self._native_settled(host, mid, to, result))

        return settled

    async def held_native(self, host: AgentHost, message_id: str, to: str, state: str, reason: str | None) -> None:
        """A native delivery came back: journal it if it is held (its later word may already be on its way)."""
        event = self._journaled.get(message_id)
        if state == State.QUEUED.value:
            now = time.monotonic()
            for mid in [m for m, at in self._queued.items() if now - at > QUEUED_WATCH_S]:
                del self._queued[mid]
            self._queued[message_id] = now
        if state != State.HELD.value:
            self._journaled.pop(message_id, None)
            if event is not None:
                event.set()
            return
        try:
            await host.record([R.held_send(message_id, state, reason, to=to)])
        except Exception:
            log.exception("could not journal the held send %s", message_id)
        if event is not None:
            event.set()

    async def resume(self, host: AgentHost) -> None:
        """After this agent (re)started: watch what its journal still holds as held, or settle it."""
        for mid, rec in list(host.state.held_sends.items()):
            if rec.get("notified"):
                continue
            to = str(rec.get("to") or "?")
            if rec.get("state") not in PENDING:  # settled, but the session was not told yet
                self._spawn(self._tell(host, mid, to, str(rec.get("state")), rec.get("reason")))
            elif isinstance(rec.get("relay_message"), dict):  # across the relay (shim/relay_held.py)
                from crosstalk.shim.relay_held import watch

                self._spawn(watch(self, host, rec["relay_message"]))
            elif rec.get("task_id") and rec.get("to_agent"):
                self._spawn(self._watch_task(host, mid, to, str(rec["to_agent"]), str(rec["task_id"])))
            else:
                self._spawn(self._settle(host, mid, to, State.UNKNOWN.value, NATIVE_LOST))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    # ------------------------------------------------------------------ internals
    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch_task(self, host: AgentHost, mid: str, to: str, to_agent: str, task_id: str) -> None:
        from crosstalk.registry.discovery import resolve
        from crosstalk.registry.errors import AmbiguousName, NoSuchAgent

        failures = 0
        while True:
            try:
                target = resolve(self.paths, to_agent)
                client = self.client_for(host, target)
                view = await client.get(task_id) if client is not None else None
            except (NoSuchAgent, AmbiguousName):
                view, failures = None, GONE_AFTER
            except Exception as exc:  # the target is restarting, or its socket is busy: try again
                log.info("reading the task of held send %s failed: %s", mid, exc)
                view = None
            if view is not None and view.delivery not in PENDING:
                reason = (view.answer.reason if view.answer is not None else None) or view.reason
                await self._settle(host, mid, to, str(view.delivery or State.UNKNOWN.value), reason)
                return
            failures = failures + 1 if view is None else 0
            if failures >= GONE_AFTER:
                await self._settle(host, mid, to, State.UNKNOWN.value, TARGET_GONE)
                return
            await asyncio.sleep(POLL_S)

    async def _native_settled(self, host: AgentHost, mid: str, to: str, result: InjectResult) -> None:
        event = self._journaled.get(mid)
        if event is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), 10.0)  # the held record first, then its final word
        self._journaled.pop(mid, None)
        if self._queued.pop(mid, None) is not None:
            if result.state is State.UNREACHABLE:  # queued, then lost unread
                await self._tell_lost(host, mid, to, result)
            return
        if mid not in host.state.held_sends:
            return  # never answered held (a contradiction of an accepted send is the receiver's to journal)
        await self._settle(host, mid, to, result.state.value, result.reason)
        if result.state is State.QUEUED:  # released into the session's queue: it may still be lost unread
            self._queued[mid] = time.monotonic()

    async def _tell_lost(self, host: AgentHost, mid: str, to: str, result: InjectResult) -> None:
        try:
            await host.record([R.held_send(mid, result.state.value, result.reason, to=to)])
        except Exception:
            log.exception("could not journal the loss of queued send %s", mid)
            return
        await self._tell(host, mid, to, result.state.value, result.reason, State.QUEUED.value)

    async def _settle(self, host: AgentHost, mid: str, to: str, state: str, reason: str | None) -> None:
        known = host.state.held_sends.get(mid, {})
        if known.get("notified") or known.get("state") not in (None, *PENDING, state):
            return
        try:
            was = known.get("was") or (known.get("state") if known.get("state") in PENDING else None)
            await host.record([R.held_send(mid, state, reason, to=to, was=was)])
        except Exception:
            log.exception("could not journal the final word on held send %s", mid)
            return
        await self._tell(host, mid, to, state, reason)

    async def _tell(
        self, host: AgentHost, mid: str, to: str, state: str, reason: str | None, was: str | None = None
    ) -> None:
        """`was`: what the send waited as (held or queued); None: as its record says."""
        if was is None:
            was = str(host.state.held_sends.get(mid, {}).get("was") or State.HELD.value)
        try:
            told = await host.notify(notice(mid, to, state, reason, WAS.get(was, WAS[State.HELD.value])))
        except Exception:
            log.exception("could not tell the session the final word on %s", mid)
            return
        if told.delivered:
            with contextlib.suppress(Exception):
                await host.record([R.held_send(mid, state, reason, to=to, notified=True, was=was)])
