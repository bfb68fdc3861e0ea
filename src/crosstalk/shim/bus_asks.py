"""Sends over the git bus from a live agent (`model@machine`, `name@machine`), and the asks among them tracked like
any ask: a `sent` record is journaled before the message is committed, so `receive_message(state="replies")`
finds the answer and a restart keeps it; with a deadline, the asking session is told once it passes unanswered
(a late answer still arrives). Deadlines are re-armed from the journal when the agent is bound again."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from crosstalk.agent import AgentHost
from crosstalk.registry.paths import StatePaths

log = logging.getLogger(__name__)

JOURNAL_TIMEOUT_S = 30.0


async def send_over_bus(
    host: AgentHost, paths: StatePaths, to: str, text: str, *, kind: str = "inform", deadline_seconds: int = 0
) -> dict[str, Any]:
    """The bus's answer to a send (queued with via: bus, or why not); an ask is journaled before it is sent."""
    from crosstalk.bus.live.bridge import send_from_live
    from crosstalk.core.message import new_message
    from crosstalk.journal import records as R

    loop = asyncio.get_running_loop()
    ask = kind == "ask"

    def journal(message_id: str) -> None:  # in send_from_live's thread, before the commit
        msg = new_message(to, text, from_=host.name, kind="ask", deadline_seconds=deadline_seconds,
                          message_id=message_id)  # fmt: skip
        asyncio.run_coroutine_threadsafe(host.record([R.sent(msg, None, "queued", None)]), loop).result(
            JOURNAL_TIMEOUT_S
        )

    try:
        before = journal if ask else None
        out = await asyncio.to_thread(send_from_live, paths, host.name, to, text, before_publish=before)
    except Exception as exc:  # the journal refused the ask: nothing was published
        log.warning("bus ask to %s not sent: %s", to, exc)
        return {"state": "unreachable", "reason": "journal_failed", "to": to}
    if ask and out.get("state") == "queued" and deadline_seconds > 0:
        arm(host, out["message_id"], to, deadline_seconds, time.time() + deadline_seconds)
    return out


def answered(host: AgentHost, message_id: str) -> bool:
    """Whether anything arrived in reply to `message_id` (the answer, or crosstalk's notice that it expired)."""
    return any(e.message.get("in_reply_to") == message_id for e in host.state.messages.values())


def arm(host: AgentHost, message_id: str, to: str, deadline_s: int, due_at: float) -> None:
    """Tell the session at `due_at` (epoch seconds) if the ask `message_id` is still unanswered then."""
    loop = asyncio.get_running_loop()
    loop.call_later(max(0.0, due_at - time.time()), lambda: loop.create_task(_expire(host, message_id, to, deadline_s)))


async def _expire(host: AgentHost, message_id: str, to: str, deadline_s: int) -> None:
    if answered(host, message_id):
        return
    text = (
        f"Your ask to {to} (message_id {message_id}) got no answer within its {deadline_s} s deadline. A late "
        "answer still arrives as a message with in_reply_to = that message_id."
    )
    try:
        await host.notify(text, in_reply_to=message_id)
    except Exception:  # the host closed meanwhile, or its journal failed: the next bind re-arms it
        log.info("could not tell %s that its bus ask %s expired", host.name, message_id, exc_info=True)


def rearm(host: AgentHost) -> int:
    """Arm the deadlines of this agent's unanswered bus asks from its journal (at bind); how many."""
    n = 0
    for mid, rec in list(host.state.sent.items()):
        msg = rec.get("message") or {}
        deadline = msg.get("deadline_seconds") or 0
        to = msg.get("to") or ""
        if msg.get("kind") != "ask" or "@" not in to or not isinstance(deadline, int) or deadline <= 0:
            continue
        if answered(host, mid):
            continue
        arm(host, mid, to, deadline, float(rec.get("ts") or time.time()) + deadline)
        n += 1
    return n
