"""The one receiver chain (ARCHITECTURE.md §5). Every ingress feeds it; it answers one Outcome per message.

    dedupe → hop guard → policy → admission → journal (fsync) → inject → outcome (fsync)

No acknowledgement outruns the journal: a message is acknowledged only after its `received` and `dispatch` records
are durable, and its final state only after its `outcome` record is. A failed journal write before the harness
write answers unreachable (nothing reached the session); after it, unknown (never accepted, never resent).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import Outcome, State
from crosstalk.harness.base import (
    INJECT_STATES,
    Harness,
    HarnessDisconnected,
    HarnessError,
    HarnessRefused,
    InjectRequest,
    InjectResult,
    PreSendFailure,
)
from crosstalk.journal import Journal, JournalError, JournalState, MessageEntry
from crosstalk.journal import records as R
from crosstalk.policy import Limits, Load, ReceiverView, evaluate

log = logging.getLogger(__name__)

INJECT_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message as an ingress hands it to the chain: the record plus what the transport proved."""

    message: Message
    sender: Sender
    transport: str  # uds | a2a | bus
    native: bool = False  # a harness-native frame: fresh id, exempt from dedupe, no chain to check
    new_task: bool = False  # opens a new A2A task (counts against the pending-task limit)
    default_wait: bool = False  # the sender blocks until a terminal state (counts against the wait limit)


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    agent_id: str
    name: str
    hop_entry: str
    binding: dict[str, Any]
    reply_address: str | None = None


@dataclass(slots=True)
class ChainStats:
    received: int = 0
    rejected: int = 0
    duplicates: int = 0
    injected: int = 0
    by_state: dict[str, int] = field(default_factory=dict)


class Receiver:
    def __init__(
        self,
        identity: AgentIdentity,
        journal: Journal,
        state: JournalState,
        harness: Harness,
        view: Callable[[], ReceiverView],
        *,
        limits: Limits | None = None,
        inject_timeout_s: float = INJECT_TIMEOUT_S,
    ) -> None:
        self.identity = identity
        self.journal = journal
        self.state = state
        self.harness = harness
        self.view = view
        self.limits = limits or Limits()
        self.inject_timeout_s = inject_timeout_s
        self.stats = ChainStats()
        self._inflight: dict[tuple[str, str], asyncio.Future[Outcome]] = {}
        self._default_waits = 0
        self._listeners: list[Callable[[Inbound, Outcome], None]] = []

    def begin_default_wait(self) -> None:
        """A sender is about to block until its message is settled: counts against the wait limit."""
        self._default_waits += 1

    def end_default_wait(self) -> None:
        self._default_waits -= 1

    def add_listener(self, fn: Callable[[Inbound, Outcome], None]) -> None:
        self._listeners.append(fn)

    # ------------------------------------------------------------------ the chain
    async def receive(self, inbound: Inbound) -> Outcome:
        self.stats.received += 1
        msg = inbound.message
        key = None if inbound.native else (inbound.sender.dedupe_key, msg.message_id)
        if key is not None:
            # In flight first: the first copy's records are applied before its outcome, and a duplicate that
            # arrives in that window must wait for the answer, not report the journal-internal `dispatching`.
            running = self._inflight.get(key)
            if running is not None:
                # A concurrent duplicate waits for the first one's answer: exactly one injection.
                self.stats.duplicates += 1
                return await asyncio.shield(running)
            prior = self.state.lookup_dedupe(*key)
            if prior is not None:
                self.stats.duplicates += 1
                return _outcome_of(prior, duplicate=True)
            if msg.message_id in self.state.messages or any(k[1] == msg.message_id for k in self._inflight):
                return self.reject(inbound, "message_id_in_use")
            fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
            self._inflight[key] = fut
        try:
            if inbound.default_wait:
                self.begin_default_wait()
            outcome = await self._run(inbound)
        except BaseException:
            if key is not None:
                fut = self._inflight.pop(key)
                if not fut.done():
                    fut.cancel()  # a waiting duplicate sees the failure too; nothing was acknowledged
            raise
        finally:
            if inbound.default_wait:
                self.end_default_wait()
        if key is not None:
            self._inflight.pop(key).set_result(outcome)
        self.stats.by_state[outcome.state.value] = self.stats.by_state.get(outcome.state.value, 0) + 1
        for fn in self._listeners:
            try:
                fn(inbound, outcome)
            except Exception:  # a listener never breaks delivery
                log.exception("receiver listener failed")
        return outcome

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

    def _load(self) -> Load:
        # The current message's own wait is already counted in _default_waits; the limit is about the others.
        return Load(
            pending_tasks=self.state.pending_count(),
            # An accepted ask not yet delivered opens its obligation on delivery: it counts now (a stalled
            # session must not let asks pile up past the limit).
            open_asks=self.state.open_asks() + self.state.pending_asks(),
            default_waits=max(0, self._default_waits - 1),
        )

    async def _run(self, inbound: Inbound) -> Outcome:
        msg = inbound.message
        reason, _bucket = self.check(inbound)
        if reason is not None:
            return self.reject(inbound, reason)
        if msg.kind is Kind.PING:
            # Liveness only: answered after the same checks, never journaled, never injected.
            return Outcome(msg.message_id, State.ACCEPTED, "pong", {"ping": True})

        # Inline delivery: the message and its dispatch claim become durable together, before any harness write.
        claim = R.dispatch(msg.message_id, self.identity.binding)
        failed = await self._record_or_unreachable(msg, [self._received_record(inbound), claim], "before dispatch")
        return failed if failed is not None else await self._inject_and_record(inbound)

    # ------------------------------------------------------------------ native replies (ADR 0009)
    async def bounce(self, inbound: Inbound, *, open_messages: list[dict[str, str]] | None = None) -> Outcome:
        """A native frame from this agent's own session (Claude answering an envelope natively, to our address)
        carries no correlation: it is never forwarded. Journal it as bounced, then tell the session, listing the
        open inbound messages it may answer with the reply tool. A bounce opens no route and is never bounced."""
        msg = inbound.message
        settled = R.outcome(msg.message_id, State.BOUNCED, "native_reply_bounced", self.identity.binding)
        failed = await self._record_or_unreachable(msg, [self._received_record(inbound), settled], "for a bounce")
        if failed is not None:
            return failed
        first_line = (msg.text.strip().splitlines() or [""])[0][:200]
        lines = [
            f"crosstalk: your native message was not delivered to anyone (native replies are not forwarded): "
            f"{first_line!r}.",
        ]
        listed = (open_messages or [])[:10]
        if listed:
            lines.append("To answer one of these, call the reply tool with its message_id; otherwise use send_message:")
            lines += [f"- {m['message_id']} from {m['from']} ({m['kind']})" for m in listed]
            lines.append("receive_message lists the rest.")
        else:
            lines.append("No inbound message is open for a reply: use send_message to write to an agent.")
        notice = Message(
            message_id=new_message_id(), to=self.identity.name, parts=(TextPart("\n".join(lines)),), from_="crosstalk"
        )
        crosstalk = Sender(SenderClass.VERIFIED, self.identity.agent_id, "crosstalk", inbound.transport)
        result = await self._inject(Inbound(notice, crosstalk, inbound.transport, native=True))
        evidence = {"notice": notice.message_id, "notice_state": result.state.value}
        return Outcome(msg.message_id, State.BOUNCED, "native_reply_bounced", evidence)

    # ------------------------------------------------------------------ the queued path (A2A tasks)
    async def accept(self, inbound: Inbound, extra: list[dict[str, Any]] | None = None) -> None:
        """Journal a checked message without claiming it for dispatch (it stays submitted, hence cancelable),
        together with `extra` records (its task record). Raises JournalError when that is not durable."""
        await self.record([self._received_record(inbound), *(extra or [])])

    async def record(self, records: list[dict[str, Any]]) -> None:
        """Make records durable, then fold them into the agent's state, in that order: how records are added to the
        journal, so memory never holds what the journal could lose. Raises JournalError."""
        await self.journal.append_many_async(records)
        for rec in records:
            self.state.apply(rec)

    async def dispatch(self, inbound: Inbound) -> Outcome:
        """Claim an accepted message for dispatch, inject it, journal the outcome."""
        claim = R.dispatch(inbound.message.message_id, self.identity.binding)
        failed = await self._record_or_unreachable(inbound.message, [claim], "before dispatch")
        return failed if failed is not None else await self._inject_and_record(inbound)

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

    async def _inject_and_record(self, inbound: Inbound) -> Outcome:
        msg = inbound.message
        result = await self._inject(inbound)
        out_rec = R.outcome(msg.message_id, result.state, result.reason, self.identity.binding, result.evidence)
        try:
            await self.journal.append_async(out_rec)
        except (TimeoutError, JournalError, OSError) as exc:
            # The harness may have the message; without a durable outcome we cannot claim delivery.
            log.error("journal append failed after dispatch: %s", exc)
            return Outcome(msg.message_id, State.UNKNOWN, "journal_write_failed_after_dispatch")
        self.state.apply(out_rec)
        if result.state in (State.ACCEPTED, State.QUEUED):
            self.stats.injected += 1
        return Outcome(msg.message_id, result.state, result.reason, result.evidence)

    async def _inject(self, inbound: Inbound) -> InjectResult:
        """Call the adapter and map every way it can end to exactly one state."""
        msg = inbound.message
        request = InjectRequest(
            message=msg,
            sender=inbound.sender,
            delivery=msg.delivery,
            reply_address=self.identity.reply_address,
            meta=msg.kind is Kind.META,
        )
        try:
            result = await asyncio.wait_for(self.harness.inject(request), self.inject_timeout_s)
        except (HarnessRefused, PreSendFailure) as exc:
            return InjectResult(State.UNREACHABLE, exc.reason)
        except HarnessDisconnected as exc:
            return InjectResult(State.UNKNOWN, exc.reason)
        except HarnessError as exc:
            return InjectResult(State.UNKNOWN, exc.reason)
        except TimeoutError:
            return InjectResult(State.UNKNOWN, "inject_timeout")
        except Exception as exc:  # an adapter bug may have written already: unknown, never resent
            log.exception("adapter raised")
            return InjectResult(State.UNKNOWN, f"adapter_error: {type(exc).__name__}")
        if not isinstance(result, InjectResult) or result.state not in INJECT_STATES:
            return InjectResult(State.UNKNOWN, "malformed_harness_answer")
        return result

    def reject(self, inbound: Inbound, reason: str) -> Outcome:
        """Refuse a message the chain never admits (an ingress may decide this before the chain runs)."""
        self.stats.rejected += 1
        msg = inbound.message
        try:
            # An audit record that acknowledges nothing: written, not waited for.
            self.journal.submit([R.rejected(msg, inbound.sender, reason, transport=inbound.transport)], durable=False)
        except (JournalError, OSError, ValueError):
            log.warning("could not journal a rejection of %s", msg.message_id)
        return Outcome(msg.message_id, State.REJECTED, reason)

    # ------------------------------------------------------------------ restart
    def reconcile(self) -> list[dict[str, Any]]:
        """After replay: settle every message a crash left between acceptance and outcome. Nothing is re-injected.

        - dispatch claimed, no outcome → unknown (there is no evidence either way), or unreachable if the record
          was bound to another conversation;
        - journaled, never claimed → the hop, policy and size checks run again: a pass becomes recovered (it shows
          in the mailbox, never injected) or unreachable in another conversation; a failure becomes rejected.
        """
        written: list[dict[str, Any]] = []
        bind = self.identity.binding
        for entry in list(self.state.messages.values()):
            if entry.state not in (State.SUBMITTED, State.DISPATCHING):
                continue
            if entry.message.get("task_id") and entry.state is State.SUBMITTED:
                continue  # a task's message: the task service resumes or keeps it (seed 000 R2)
            same = _same_binding(entry.binding, bind)
            if entry.state is State.DISPATCHING:
                state, reason = (
                    (State.UNKNOWN, "crashed_during_dispatch")
                    if same
                    else (State.UNREACHABLE, "bound_to_another_conversation")
                )
            else:
                failed = self._recheck(entry)
                if failed:
                    state, reason = State.REJECTED, failed
                elif same:
                    state, reason = State.RECOVERED, "journaled_before_crash"
                else:
                    state, reason = State.UNREACHABLE, "bound_to_another_conversation"
            rec = R.outcome(entry.message_id, state, reason, bind, reconciled=True)
            written.append(rec)
        if written:
            self.journal.append_many(written)
            for rec in written:
                self.state.apply(rec)
        return written

    def _recheck(self, entry: MessageEntry) -> str | None:
        try:
            msg = Message.from_dict(entry.message, check_size=False)  # size is admission's to judge
            sender = Sender.from_dict(entry.sender)
        except (ValueError, KeyError):
            return "unreadable_record"
        reason, _ = self.check(Inbound(msg, sender, entry.transport, native=entry.native), load=Load())
        return reason


def _same_binding(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    if not a:
        return False
    return a.get("session_ref") == b.get("session_ref") and a.get("endpoint") == b.get("endpoint")


def _outcome_of(entry: MessageEntry, *, duplicate: bool) -> Outcome:
    evidence = {"duplicate": True} if duplicate else {}
    if entry.state in (State.SUBMITTED, State.DISPATCHING):
        # Claimed but no durable outcome (its outcome write failed, or the call died): ambiguous, never resent.
        return Outcome(entry.message_id, State.UNKNOWN, entry.reason or "no_durable_outcome", evidence)
    if entry.state is State.RECOVERED:
        # A mailbox-only state (§8): it was journaled before a crash and never dispatched. The sender learns
        # only that delivery is not proven; the receiving agent finds the message in its mailbox.
        return Outcome(entry.message_id, State.UNKNOWN, "recovered_to_mailbox", evidence)
    return Outcome(entry.message_id, entry.state, entry.reason, evidence)
