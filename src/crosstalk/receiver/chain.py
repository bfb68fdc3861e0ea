"""The one receiver chain. Every ingress feeds it; it answers one Outcome per message.

    dedupe → hop guard → policy → admission → journal (fsync) → inject → outcome (fsync)

Every ingress runs it through `receive`: uds frames, A2A tasks (journaled by the chain, dispatched later in order
by the task service: `defer`, then `dispatch`), bus deliveries (over uds), and crosstalk's own notices (`notify`:
claim changes, bounces). A native frame from the agent's own session is bounced inside the chain. Listeners and
stats see every message once, with its final outcome.

No acknowledgement outruns the journal: a message is acknowledged only after its `received` and `dispatch` records
are durable, and its final state only after its `outcome` record is. A failed journal write before the harness
write answers unreachable (nothing reached the session); after it, unknown (never accepted, never resent).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import DELIVERED_STATES, LATE_STATES, Outcome, Reason, State
from crosstalk.harness.base import HarnessAdapter, InjectRequest, InjectResult, SettlesLater
from crosstalk.journal import Journal, JournalError, JournalState, MessageEntry
from crosstalk.journal import records as R
from crosstalk.policy import Limits, Load, ReceiverView, classify, evaluate
from crosstalk.receiver.inbound import NOTICE_TRANSPORT, AgentIdentity, ChainStats, Inbound
from crosstalk.receiver.inject import inject
from crosstalk.receiver.notices import bounce_text
from crosstalk.receiver.reconcile import outcome_of, settle_crashed

log = logging.getLogger(__name__)

INJECT_TIMEOUT_S = 30.0
STALLED_PROBE_S = 2.0  # the injection timeout while the session is stalled (the last one timed out)
Listener = Callable[[Inbound, Outcome], None]
LateListener = Callable[[MessageEntry, Outcome], None]


class Receiver:
    def __init__(
        self,
        identity: AgentIdentity,
        journal: Journal,
        state: JournalState,
        harness: HarnessAdapter,
        view: Callable[[], ReceiverView],
        *,
        limits: Limits | None = None,
        inject_timeout_s: float = INJECT_TIMEOUT_S,
        open_messages: Callable[[], list[dict[str, str]]] | None = None,
    ) -> None:
        self.identity = identity
        self.journal = journal
        self.state = state
        self.harness = harness
        self.view = view
        self.limits = limits or Limits()
        self.inject_timeout_s = inject_timeout_s
        self.open_messages = open_messages or list  # what a bounce notice lists as still answerable
        self.stats = ChainStats()
        self._inflight: dict[tuple[str, str], asyncio.Future[Outcome]] = {}
        self._default_waits, self._stalled = 0, False  # _stalled: the last injection timed out (_inject_and_record)
        self._admitting = self._admitting_asks = 0  # admitted by the checks, journal write not yet done
        self._listeners: list[Listener] = []
        self._late_listeners: list[LateListener] = []
        self._early: dict[str, InjectResult] = {}  # a final word that arrived before its held answer was journaled
        self._late_lock = asyncio.Lock()
        self._late_tasks: set[asyncio.Task[Outcome | None]] = set()
        self._deferred_buckets: dict[str, str] = {}  # a journaled message's sender bucket, from check to dispatch
        self._settles_from = (State.HELD, State.QUEUED) if getattr(harness, "settles_queued", False) else (State.HELD,)
        if isinstance(harness, SettlesLater):
            harness.on_settled(self._on_late)

    def begin_default_wait(self) -> None:
        """A sender blocks until its message is settled: counts against the wait limit until end_default_wait."""
        self._default_waits += 1

    def end_default_wait(self) -> None:
        self._default_waits -= 1

    def add_listener(self, fn: Listener) -> None:
        """fn(inbound, outcome) once per message, with its final outcome, whatever the ingress."""
        self._listeners.append(fn)

    def add_late_listener(self, fn: LateListener) -> None:
        """fn(entry, outcome) for each later word on a message already answered (held → its final state)."""
        self._late_listeners.append(fn)

    # ------------------------------------------------------------------ the chain
    async def receive(
        self, inbound: Inbound, *, records: Sequence[dict[str, Any]] = (), defer: bool = False, claim: bool = False
    ) -> Outcome:
        """Run the chain for one message. `records` are journaled with it, in the same durable write (its task
        record). `defer`: journal it and answer `submitted`; the caller dispatches it later with `dispatch` (the
        task service's ordered, cancelable queue). `claim` (with defer): its dispatch claim is in that same write
        (the queue is idle, so nothing could cancel it before the worker would claim it): one durable write less."""
        self.stats.received += 1
        msg = inbound.message
        if self._is_own_native(inbound):
            return self._settle(inbound, await self._bounce(inbound))
        key = None if inbound.native else (inbound.sender.dedupe_key, msg.message_id)
        if key is not None:
            # In flight first: the first copy's records are applied before its outcome, and a duplicate that
            # arrives in that window must wait for the answer, not report the journal-internal `dispatching`.
            running = self._inflight.get(key)
            if running is not None:
                # A concurrent duplicate waits for the first one's answer: exactly one injection.
                self.stats.duplicates += 1
                first = await asyncio.shield(running)
                return first.with_(evidence={**first.evidence, "duplicate": True})
            prior = self.state.lookup_dedupe(*key)
            if prior is not None:
                self.stats.duplicates += 1
                return outcome_of(prior, duplicate=True)
            if self.state.knows(msg.message_id) or any(k[1] == msg.message_id for k in self._inflight):
                return self.reject(inbound, "message_id_in_use")
            fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
            self._inflight[key] = fut
        try:
            if inbound.default_wait:
                self.begin_default_wait()
            outcome = await self._run(inbound, records, defer, claim)
        except BaseException as exc:
            if key is not None:
                fut = self._inflight.pop(key)
                if not fut.done():  # a waiting duplicate is answered, not cancelled: the first copy may have reached
                    fut.set_result(Outcome(msg.message_id, State.UNKNOWN, f"first copy failed: {type(exc).__name__}"))
            raise
        finally:
            if inbound.default_wait:
                self.end_default_wait()
        if key is not None:
            self._inflight.pop(key).set_result(outcome)
        return outcome if outcome.state is State.SUBMITTED else self._settle(inbound, outcome)

    async def dispatch(self, inbound: Inbound, *, claimed: bool = False) -> Outcome:
        """The deferred half of the chain: claim a message `receive(defer=True)` journaled (unless it was journaled
        with its claim: `claimed`), inject it, journal the outcome."""
        mid = inbound.message.message_id
        bucket = self._deferred_buckets.pop(mid, None)
        if bucket is None:  # journaled before a restart: its check ran in the earlier process
            bucket = classify(inbound.sender, self.view()).value
        failed = None
        if not claimed:
            claim = R.dispatch(mid, self.identity.binding)
            failed = await self._record_or_unreachable(inbound.message, [claim], "before dispatch")
        if failed is not None:
            return self._settle(inbound, failed)
        return self._settle(inbound, await self._inject_and_record(inbound, bucket))

    async def withdraw(self, inbound: Inbound, reason: str, *, reconciled: bool = False) -> Outcome:
        """The deferred half's other ending: a message `receive(defer=True)` journaled is settled as rejected
        without reaching the session (its task was canceled, or a restart's re-check refused it). Raises
        JournalError when that is not durable (nothing changed)."""
        mid = inbound.message.message_id
        self._deferred_buckets.pop(mid, None)
        await self.record([R.outcome(mid, State.REJECTED, reason, self.identity.binding, reconciled=reconciled)])
        return self._settle(inbound, Outcome(mid, State.REJECTED, reason))

    async def notify(self, text: str, *, in_reply_to: str | None = None) -> Outcome:
        """Tell the agent's own session something, as crosstalk: an inform through the whole chain (journaled,
        injected, outcome journaled). policy/notices.py admits it whatever the agent's role."""
        notice = Message(
            message_id=new_message_id(),
            to=self.identity.name,
            parts=(TextPart(text),),
            from_="crosstalk",
            in_reply_to=in_reply_to,
        )
        me = Sender(SenderClass.VERIFIED, self.identity.agent_id, "crosstalk", NOTICE_TRANSPORT)
        return await self.receive(Inbound(notice, me, NOTICE_TRANSPORT, native=True))

    def check(self, inbound: Inbound, *, load: Load | None = None) -> tuple[str | None, str]:
        """Hop guard, policy and admission for one message: (reason or None, bucket)."""
        msg = inbound.message
        decision = evaluate(
            kind=msg.kind,
            text_bytes=msg.text_bytes(),
            sender=inbound.sender,
            view=self.view(),
            transport=inbound.transport,
            hop_chain=() if inbound.native else msg.hop_chain,
            self_entry=self.identity.hop_entry,
            load=load if load is not None else self._load(),
            limits=self.limits,
            new_task=inbound.new_task,
            default_wait=inbound.default_wait,
        )
        return (None if decision.ok else decision.reason), decision.bucket.value

    def reject(self, inbound: Inbound, reason: str) -> Outcome:
        """Refuse a message the chain never admits (an ingress may decide this before the chain runs)."""
        return self._settle(inbound, self._refuse(inbound, reason))

    def _refuse(self, inbound: Inbound, reason: str) -> Outcome:
        """The rejection itself: counted and audited, not yet settled (the caller settles it once)."""
        self.stats.rejected += 1
        msg = inbound.message
        try:
            # An audit record that acknowledges nothing: written, not waited for.
            self.journal.submit([R.rejected(msg, inbound.sender, reason, transport=inbound.transport)], durable=False)
        except (JournalError, OSError, ValueError):
            log.warning("could not journal a rejection of %s", msg.message_id)
        return Outcome(msg.message_id, State.REJECTED, reason)

    async def record(self, records: list[dict[str, Any]]) -> None:
        """Make records durable, then fold them into the agent's state, in that order: how records are added to the
        journal, so memory never holds what the journal could lose. Raises JournalError."""
        await self.journal.append_many_async(records)
        for rec in records:
            self.state.apply(rec)

    def reconcile(self) -> list[dict[str, Any]]:
        """After replay, before anything can arrive: settle what a crash left open (receiver/reconcile.py)."""
        written = settle_crashed(self.state, self.identity.binding, lambda ib: self.check(ib, load=Load())[0])
        if written:
            self.journal.append_many(written)
            for rec in written:
                self.state.apply(rec)
        return written

    # ------------------------------------------------------------------ late outcomes
    def _on_late(self, message_id: str, result: InjectResult) -> None:
        """The adapter's sink: the harness's later word on a message (on the event loop)."""
        task = asyncio.get_running_loop().create_task(self.settle_late(message_id, result))
        self._late_tasks.add(task)
        task.add_done_callback(self._late_tasks.discard)

    async def settle_late(self, message_id: str, result: InjectResult) -> Outcome | None:
        """Journal the harness's later word on `message_id` (durable, then apply), then tell the late listeners. Held
        (queued, for a harness that settles those) moves on once; accepted only when contradicted (held or refused
        after all); queued only when lost unread (unreachable). A repeat, or a word on a settled one, does nothing."""
        async with self._late_lock:
            entry = self.state.messages.get(message_id)
            if entry is None:
                log.info("a later word on %s, which this agent does not know", message_id)
                return None
            if entry.state is State.DISPATCHING:
                self._early[message_id] = result  # the held answer is still being journaled: applied after it
                return None
            settled = entry.state in self._settles_from and result.state in LATE_STATES - {entry.state}
            contradicted = entry.state is State.ACCEPTED and result.state in (State.HELD, State.REJECTED)
            lost = entry.state is State.QUEUED and result.state is State.UNREACHABLE
            if not (settled or contradicted or lost):
                return None
            after = {"contradicts": "accepted"} if contradicted else {"after": "queued"} if lost else {}
            evidence = {**result.evidence, "late": True, **after}
            rec = R.outcome(message_id, result.state, result.reason, self.identity.binding, evidence)
            try:
                await self.record([rec])
            except (TimeoutError, JournalError, OSError) as exc:
                log.error("journal append failed for a later word on %s: %s", message_id, exc)
                return None
            outcome = Outcome(message_id, result.state, result.reason, evidence)
            self.stats.by_state[outcome.state.value] = self.stats.by_state.get(outcome.state.value, 0) + 1
        _tell(self._late_listeners, entry, outcome)
        return outcome

    # ------------------------------------------------------------------ internals
    def _load(self) -> Load:
        # The current message's own wait is already counted in _default_waits; the limit is about the others.
        # Admitted messages whose journal write is still under way count too: concurrent arrivals are checked
        # against each other, not only against what is already journaled.
        return Load(
            pending_tasks=self.state.pending_count() + self._admitting,
            # An accepted ask not yet delivered opens its obligation on delivery: it counts now (a stalled
            # session must not let asks pile up past the limit).
            open_asks=self.state.open_asks() + self.state.pending_asks() + self._admitting_asks,
            default_waits=max(0, self._default_waits - 1),
        )

    async def _run(self, inbound: Inbound, records: Sequence[dict[str, Any]], defer: bool, claim: bool) -> Outcome:
        msg = inbound.message
        reason, bucket = self.check(inbound)
        if reason is not None:
            return self._refuse(inbound, reason)
        if msg.kind is Kind.PING:
            # Liveness only: answered after the same checks, never journaled, never injected.
            return Outcome(msg.message_id, State.ACCEPTED, Reason.PONG, {"ping": True})
        if defer:
            claims = [R.dispatch(msg.message_id, self.identity.binding)] if claim else []
            batch = [self._received_record(inbound), *claims, *records]
            failed = await self._admit(msg, batch, "on accept")
            if failed is not None:
                return failed
            self._deferred_buckets[msg.message_id] = bucket
            return Outcome(msg.message_id, State.SUBMITTED)
        # Inline delivery: the message and its dispatch claim become durable together, before any harness write.
        dispatch = R.dispatch(msg.message_id, self.identity.binding)
        batch = [self._received_record(inbound), dispatch, *records]
        failed = await self._admit(msg, batch, "before dispatch")
        return failed if failed is not None else await self._inject_and_record(inbound, bucket)

    async def _admit(self, msg: Message, records: list[dict[str, Any]], when: str) -> Outcome | None:
        """Journal an admitted message. It is counted against the limits from its check (the same event-loop step)
        until the journal holds it, so concurrent arrivals are checked against each other, not only against what
        is already journaled."""
        ask = msg.kind is Kind.ASK
        self._admitting += 1
        self._admitting_asks += ask
        try:
            return await self._record_or_unreachable(msg, records, when)
        finally:
            self._admitting -= 1
            self._admitting_asks -= ask

    def _is_own_native(self, inbound: Inbound) -> bool:
        """A native frame from this agent's own session (Claude answering an envelope natively, to our address)."""
        sender = inbound.sender
        own = sender.sender_class is SenderClass.VERIFIED and sender.agent_id == self.identity.agent_id
        return inbound.native and own and inbound.transport != NOTICE_TRANSPORT

    async def _bounce(self, inbound: Inbound) -> Outcome:
        """A native reply (the session writing to our address itself) names no message, so it is never forwarded.
        Journal it as bounced, then tell the session, listing the open inbound messages it may answer with the
        reply tool. A bounce opens no route, and its notice is crosstalk's own, so it is never bounced."""
        msg = inbound.message
        settled = R.outcome(msg.message_id, State.BOUNCED, "native_reply_bounced", self.identity.binding)
        failed = await self._record_or_unreachable(msg, [self._received_record(inbound), settled], "for a bounce")
        if failed is not None:
            return failed
        notice = await self.notify(bounce_text(msg.text, self.open_messages()))
        evidence = {"notice": notice.message_id, "notice_state": notice.state.value}
        return Outcome(msg.message_id, State.BOUNCED, "native_reply_bounced", evidence)

    async def _record_or_unreachable(self, msg: Message, records: list[dict[str, Any]], when: str) -> Outcome | None:
        """`record` before the harness is touched: a journal that fails here means nothing reached the session, so
        the answer is unreachable (returned); None once the records are durable and applied."""
        try:
            await self.record(records)
        except (TimeoutError, JournalError, OSError) as exc:
            log.error("journal append failed %s: %s", when, exc)
            return Outcome(msg.message_id, State.UNREACHABLE, "journal_write_failed")
        return None

    def _received_record(self, inbound: Inbound) -> dict[str, Any]:
        return R.received(
            inbound.message,
            inbound.sender,
            dedupe_key=None if inbound.native else inbound.sender.dedupe_key,
            transport=inbound.transport,
            bind=self.identity.binding,
            native=inbound.native,
        )

    async def _inject_and_record(self, inbound: Inbound, bucket: str) -> Outcome:
        """Inject an admitted, journaled message (`bucket`: its sender's, from its check) and journal the outcome."""
        msg = inbound.message
        request = InjectRequest(
            message=msg,
            sender=inbound.sender,
            delivery=msg.delivery,
            reply_address=self.identity.reply_address,
            meta=msg.kind is Kind.META,
            bucket=bucket,
        )
        # A session that let an injection time out is stalled: the next ones get a short probe, not the full wait,
        # so a queue behind a stuck harness drains in seconds, each still tried once; a delivery clears it.
        timeout = min(self.inject_timeout_s, STALLED_PROBE_S) if self._stalled else self.inject_timeout_s
        result: InjectResult = await inject(self.harness, request, timeout)
        if result.reason == "inject_timeout":
            if self._stalled:
                result = replace(result, reason="session_stalled")
            self._stalled = True
        elif result.state in DELIVERED_STATES:
            self._stalled = False
        out_rec = R.outcome(msg.message_id, result.state, result.reason, self.identity.binding, result.evidence)
        try:
            await self.journal.append_async(out_rec)
        except (TimeoutError, JournalError, OSError) as exc:
            # The harness may have the message; without a durable outcome we cannot claim delivery.
            log.error("journal append failed after dispatch: %s", exc)
            return Outcome(msg.message_id, State.UNKNOWN, "journal_write_failed_after_dispatch")
        self.state.apply(out_rec)
        if result.state in (State.ACCEPTED, State.QUEUED, State.HELD):
            self.stats.injected += 1
        early = self._early.pop(msg.message_id, None)
        if early is not None:  # the harness's final word outran its held answer: applied now, in order
            self._on_late(msg.message_id, early)
        return Outcome(msg.message_id, result.state, result.reason, result.evidence)

    def _settle(self, inbound: Inbound, outcome: Outcome) -> Outcome:
        """Count the final outcome and tell the listeners, once per message."""
        self.stats.by_state[outcome.state.value] = self.stats.by_state.get(outcome.state.value, 0) + 1
        _tell(self._listeners, inbound, outcome)
        return outcome


def _tell(listeners: Sequence[Callable[[Any, Outcome], None]], about: Any, outcome: Outcome) -> None:
    for fn in listeners:
        try:
            fn(about, outcome)
        except Exception:  # a listener never breaks delivery
            log.exception("receiver listener failed")
