"""An agent's tool sends to NAME@ALIAS (`send_message`, `ask`, `reply`): across the NATS relay this state root
joined, through this machine's relay process (relay/local.py: the agent's bearer token proves it, and the machine's
NATS credentials stay in that one process), else (not joined, or the relay knows no such machine or agent and a git
bus is known here) over the git bus as before.

An ask crosses as an ask (relay/wire.py writes it so an older receiving machine still takes it, as an inform with
the ask's message_id), and the receiving session sees an ask owed a reply (policy/transport.py, `relay`); it is
journaled here as the ask it is (a `sent` record, before it leaves), so the answer, an inform with in_reply_to =
that id coming back across the relay, is found by `receive_message(state="replies")`, and a deadline tells the
session once it passes unanswered (shim/bus_asks.py), as for a bus ask.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from crosstalk.agent import AgentHost
from crosstalk.core.errors import CrosstalkError
from crosstalk.core.message import Message, new_message
from crosstalk.core.states import Outcome, Reason, State
from crosstalk.registry.paths import StatePaths

SEND_TIMEOUT_S = 60.0  # the remote answer, as a local send's (shim/sending.py Sender)
FALLBACK_REASONS = frozenset({"no_such_agent", "relay:no_machine", "relay:not_serving"})


def relay_address(to: str) -> str:
    """`@relay:ALIAS/NAME` (how a relayed agent is labelled here) as the address NAME@ALIAS that reaches it; any
    other `to` unchanged."""
    if not to.startswith("@relay:"):
        return to
    from crosstalk.relay.wire import relayed_agent

    found = relayed_agent(to)
    return f"{found[0]}@{found[1]}" if found else to


async def send_away(host: AgentHost, paths: StatePaths, to: str, text: str, held: Any, **fields: Any) -> dict:
    """A tool send to a NAME@MACHINE address no live agent here has: the relay first when joined, else the bus.
    `held`: the router's HeldSends, which watches a send the remote session holds (shim/relay_held.py)."""
    from crosstalk.relay.config import joined

    kind = str(fields.get("kind") or "inform")
    if joined(paths):
        try:
            msg = new_message(to, text, from_=host.name, **fields)
        except CrosstalkError as exc:  # a message the receiver would refuse: said here, nothing sent
            return Outcome("", State.INVALID_ARGUMENTS, str(exc)).answer()
        out = await send_over_relay(host, paths, msg, timeout=SEND_TIMEOUT_S, fallback=_bus_known, held=held)
        if out is not None:
            return out
    from crosstalk.shim.bus_asks import send_over_bus

    deadline = int(fields.get("deadline_seconds") or 0)
    return await send_over_bus(host, paths, to, text, kind=kind, deadline_seconds=deadline)


async def send_over_relay(
    host: AgentHost,
    paths: StatePaths,
    msg: Message,
    *,
    timeout: float,
    fallback: Callable[[], bool] | None = None,
    held: Any = None,
) -> dict[str, Any] | None:
    """`msg` (to NAME@ALIAS, from `host`) through this machine's relay process: the model-facing answer, or None
    when the relay reaches no such machine or agent and `fallback()` says the caller may try the git bus (asked
    only then: it reads the bus registry). With `held` (HeldSends), a send the remote session holds is watched
    until its final word (shim/relay_held.py)."""
    from crosstalk.journal import records as R
    from crosstalk.registry.credentials import read_key
    from crosstalk.registry.errors import KeyFileError
    from crosstalk.relay.local import send_via_local_relay

    def failed(state: State, reason: str, **extra: Any) -> dict[str, Any]:
        return Outcome(msg.message_id, state, reason).answer(to=msg.to, **extra)

    try:
        token = read_key(paths.token_path(host.agent_id))
    except KeyFileError as exc:
        return failed(State.UNREACHABLE, Reason.NO_SENDER_TOKEN, detail=str(exc))
    ask = msg.kind.value == "ask"
    if ask:
        try:
            await host.record([R.sent(msg, None, "sending", None)])  # before it leaves: never missing
        except Exception:
            return failed(State.UNREACHABLE, Reason.JOURNAL_FAILED)
    result = await send_via_local_relay(paths, token, msg, timeout=timeout)
    outcome = result.outcome
    missing = result.no_agent is not None or outcome.reason in FALLBACK_REASONS
    if missing and fallback is not None and fallback():
        if ask:
            await _record(host, R.sent(msg, None, "unreachable", str(outcome.reason)))
        return None
    if ask:
        await _record(host, R.sent(msg, result.agent_id, outcome.state.value, outcome.reason))
        deadline = msg.deadline_seconds or 0
        if deadline > 0 and outcome.state.value not in ("rejected", "unreachable"):
            import time

            from crosstalk.shim.bus_asks import arm

            arm(host, msg.message_id, msg.to, deadline, time.time() + deadline)
    if result.no_agent is not None:
        said = f"no live agent is named {msg.to!r} (its machine says: {result.no_agent})"
        return failed(State.UNKNOWN, Reason.NO_SUCH_AGENT, hint=said)
    evidence = outcome.evidence if isinstance(outcome.evidence, dict) else {}
    hint: str | None = None
    if outcome.state is State.HELD and held is not None:
        from crosstalk.shim.relay_held import HELD_HINT, held_over_relay

        await held_over_relay(held, host, msg)
        hint = HELD_HINT
    return outcome.answer(to=result.to, via="relay", detail=evidence.get("detail"), hint=hint)


async def reply_over_relay(host: AgentHost, to: str, reply_id: str, in_reply_to: str, text: str) -> dict[str, Any]:
    """A reply (to an inform a relay brought from agent `to` = NAME@ALIAS) back across the relay: what the
    transport answered, in the shape ShimRouter._forward returns."""
    msg = new_message(to, text, from_=host.name, in_reply_to=in_reply_to, message_id=reply_id)
    out = await send_over_relay(host, host.paths, msg, timeout=SEND_TIMEOUT_S)
    assert out is not None  # no fallback: the relay's answer stands
    return {k: v for k, v in out.items() if k in ("state", "reason", "to", "hint", "detail")}


async def forward_away(
    host: AgentHost, creator: str, reply_id: str | None, in_reply_to: str, text: str, answer: Callable[..., dict]
) -> dict[str, Any]:
    """The answer to a task of another machine's agent (`creator` = `@relay:ALIAS/NAME`: A2A across the relay,
    tasks/owners.py) carried into the asker's session across the relay, as a local asker's is (ShimRouter._forward);
    for any other creator no live agent has, `asker_gone` (`answer(state, reason)` makes it)."""
    to = relay_address(creator)
    if to == creator or reply_id is None:
        return answer(State.UNREACHABLE, Reason.ASKER_GONE)
    return await reply_over_relay(host, to, reply_id, in_reply_to, text)


async def _record(host: AgentHost, rec: dict[str, Any]) -> None:
    try:
        await host.record([rec])
    except Exception:  # the first `sent` record stands: the answer is still found by its in_reply_to
        pass


def _bus_known() -> bool:
    """Whether a git bus could carry a NAME@MACHINE message from here (as `crosstalk send` decides)."""
    if os.environ.get("CROSSTALK_TRANSPORT"):
        return True
    try:
        from crosstalk.bus.transport.transports import load_entries

        return bool(load_entries(os.environ))
    except Exception:  # an unreadable bus registry: the relay's own answer stands
        return False
