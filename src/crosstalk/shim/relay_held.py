"""A send across the relay that the receiving session holds for its user (shim/held.py's watch, for NAME@ALIAS): the
remote agent's later word comes back the way it is asked for, by sending the very same message again through this
machine's relay process every POLL_S. The receiving agent answers a message it already has from its journal (the
dedupe key is the relayed sender plus the message_id), never delivering it twice, so each ask returns the message's
current state; once it is no longer held, the final word is journaled and told to the sending session as for a local
held send. The message itself is kept in the `held_send` record (`relay_message`), so a restarted agent resumes the
watch from its journal.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from crosstalk.agent import AgentHost
from crosstalk.core.message import Message
from crosstalk.core.states import State
from crosstalk.journal import records as R

log = logging.getLogger(__name__)

POLL_S = 1.0
ASK_TIMEOUT_S = 10.0
GONE_AFTER = 30  # answers in a row that say nothing of the message (relay down, agent gone) before giving up
RELAY_GONE = "the receiving machine or its agent stopped answering while its session held the message"
# `held` below is the router's HeldSends (shim/held.py, which imports this module to resume a watch).
HELD_HINT = "the session's user decides; crosstalk tells you here when it is delivered or not"


async def held_over_relay(held: Any, host: AgentHost, wire: Message) -> None:
    """`wire` (to NAME@ALIAS, as it crossed) was answered held: journal it with the message, then watch it."""
    rec = R.held_send(wire.message_id, State.HELD.value, None, to=wire.to)
    rec["relay_message"] = wire.to_dict()
    try:
        await host.record([rec])
    except Exception:
        log.exception("could not journal the held send %s", wire.message_id)
    held._spawn(watch(held, host, wire.to_dict()))


async def watch(held: Any, host: AgentHost, data: dict[str, Any]) -> None:
    from crosstalk.registry.credentials import read_key
    from crosstalk.registry.errors import KeyFileError
    from crosstalk.relay.local import send_via_local_relay

    wire = Message.from_dict(data)
    mid, to = wire.message_id, wire.to
    silent = 0
    while True:
        await asyncio.sleep(POLL_S)
        try:
            token = read_key(host.paths.token_path(host.agent_id))
        except KeyFileError:
            return  # this agent is stopping: its next start resumes the watch from the journal
        result = await send_via_local_relay(host.paths, token, wire, timeout=ASK_TIMEOUT_S)
        outcome = result.outcome
        if outcome.state is State.HELD:
            silent = 0
            continue
        if result.no_agent is not None or str(outcome.reason or "").startswith("relay:"):
            silent += 1  # the relay, the relay process or the remote agent is away: ask again
            if silent >= GONE_AFTER:
                await held._settle(host, mid, to, State.UNKNOWN.value, RELAY_GONE)
                return
            continue
        await held._settle(host, mid, to, outcome.state.value, outcome.reason)
        return
