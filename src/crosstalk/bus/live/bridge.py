"""The bridge between the bus and live agents: one address space for both.

Inbound: a channel message `to: NAME@ALIAS`, where NAME is a live crosstalk agent on the machine whose dispatcher
has alias ALIAS, is delivered into that agent's session through its receiver chain (the uds CLI frame, so the
agent's policy, dedupe and journal apply). The sender is labelled `@bus:<transport>/<from>` — an external sender,
because the repository, not the transport, vouches for `from:`. The message_id is derived from the message's place
in the transport, so a re-dispatch after a crash (the bus is at-least-once) is the same message to the receiver's
dedupe and reaches the session once.

Outbound: a live agent's `send_message`/`ask` to `model@machine` (an address no live agent here has) becomes a
channel message in the channel `live-<alias>` with `from: NAME@ALIAS`; the model's reply (`to: NAME@ALIAS`, re: that
message) comes back inbound as above, with in_reply_to = the id the send returned. A live agent's `reply` to a bus
message becomes a channel message with `re:` pointing at it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crosstalk.bus.errors import BusError, ChannelError
from crosstalk.bus.protocol.addressing import split_address, validate_address
from crosstalk.bus.protocol.layout import is_safe_relpath

if TYPE_CHECKING:
    from crosstalk.bus.protocol.message import BusMessage
    from crosstalk.bus.transport.channels import Channel
    from crosstalk.bus.transport.transports import Transport
    from crosstalk.registry.paths import StatePaths

# The shim asks parse_context / parse_sender_tag / is_bus_address about every message it sends or replies to, so
# this module imports only light pieces; the message format (PyYAML), git and the transports registry are imported
# by the functions that use them, i.e. only by agents that actually meet the bus.

TAG_PREFIX = "@bus:"
CONTEXT_PREFIX = "bus:"
DELIVER_TIMEOUT_S = 30.0
# Message ids for bus messages: uuid5 in our own namespace, over "<transport>:<channel uuid>/<relPath>".
_NAMESPACE = uuid.UUID("6f0c8a52-3e43-5d0e-9b4c-63726f737374")


def bus_message_id(transport: str, channel: str, rel_path: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{transport}:{channel}/{rel_path}"))


def sender_tag(transport: str, bus_sender: str) -> str:
    """How a live session sees a bus sender: an external handle, `@bus:<transport>/<from>`."""
    return f"{TAG_PREFIX}{transport}/{bus_sender}"


def parse_sender_tag(tag: str | None) -> tuple[str, str] | None:
    """(transport, bus sender) from `@bus:<transport>/<from>`, or None for any other sender."""
    if not tag or not tag.startswith(TAG_PREFIX):
        return None
    transport, sep, sender = tag[len(TAG_PREFIX) :].partition("/")
    return (transport, sender) if sep and transport and sender else None


def context_of(channel: str, rel_path: str) -> str:
    return f"{CONTEXT_PREFIX}{channel}/{rel_path}"


def parse_context(context_id: str | None) -> tuple[str, str] | None:
    """(channel uuid, channel-relative relPath) from a bus context id, or None."""
    if not context_id or not context_id.startswith(CONTEXT_PREFIX):
        return None
    channel, sep, rel = context_id[len(CONTEXT_PREFIX) :].partition("/")
    return (channel, rel) if sep and channel and is_safe_relpath(rel) else None


def live_agent_name(paths: StatePaths, name: str) -> str | None:
    """The live agent on this machine called `name` (exactly one), or None."""
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.errors import AmbiguousName, NoSuchAgent, RegistryError

    try:
        return resolve(paths, name).name
    except (NoSuchAgent, AmbiguousName, RegistryError):
        return None


@dataclass(frozen=True, slots=True)
class BridgeResult:
    state: str  # accepted | queued | rejected | unreachable | unknown (the receiver chain's states)
    reason: str | None = None


def deliver_live(
    paths: StatePaths,
    transport: Transport,
    channel: str,
    rel_path: str,
    msg: BusMessage,
    agent: str,
    *,
    timeout: float = DELIVER_TIMEOUT_S,
) -> BridgeResult:
    """Deliver one channel message into the live agent `agent` through its uds socket and receiver chain."""
    from crosstalk.core.errors import CrosstalkError
    from crosstalk.core.message import new_message
    from crosstalk.ingress.client import send
    from crosstalk.ingress.errors import AgentUnreachable, DeliveryError
    from crosstalk.registry.errors import AmbiguousName, NoSuchAgent

    in_reply_to = bus_message_id(transport.name, channel, msg.re[0]) if msg.re else None
    try:
        live = new_message(
            agent,
            msg.body,
            from_=sender_tag(transport.name, msg.sender),
            in_reply_to=in_reply_to,
            context_id=context_of(channel, rel_path),
            message_id=bus_message_id(transport.name, channel, rel_path),
        )
    except CrosstalkError as exc:
        return BridgeResult("rejected", str(exc))
    try:
        result = send(paths, live, timeout=timeout)
    except (NoSuchAgent, AmbiguousName) as exc:
        return BridgeResult("unreachable", str(exc))
    except AgentUnreachable as exc:
        return BridgeResult("unreachable", str(exc))
    except DeliveryError as exc:
        return BridgeResult("unknown", str(exc))
    return BridgeResult(result.outcome.state.value, result.outcome.reason)


def _environ(paths: StatePaths, environ: Mapping[str, str] | None) -> dict[str, str]:
    """The environment bus lookups see: the caller's, with the live agent's own state root."""
    return {**(os.environ if environ is None else environ), "CROSSTALK_HOME": str(paths.root)}


def pick_transport(environ: Mapping[str, str], cwd: Path | None = None) -> Transport:
    """The transport a live agent's bus traffic uses: CROSSTALK_TRANSPORT, else the one containing cwd, else the
    only one known on this machine."""
    from crosstalk.bus.transport.transports import resolve_transport

    return resolve_transport(cwd or Path.cwd(), None, environ)


def _live_channel(transport: Transport) -> Channel:
    """This machine's channel for live agents' bus traffic (`live-<alias>`: one per machine, so two machines never
    race to create a channel of the same name)."""
    from crosstalk.bus.transport.channels import LIVE_CHANNEL_PREFIX, create_channel, find_channel

    name = f"{LIVE_CHANNEL_PREFIX}{transport.alias}"
    try:
        return find_channel(transport.root, name)
    except ChannelError:
        pass
    try:
        channel, _ = create_channel(transport, name)
    except ChannelError:
        return find_channel(transport.root, name)  # another agent here created it first (the name check is locked)
    return channel


def send_from_live(
    paths: StatePaths,
    agent: str,
    to: str,
    text: str,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    sender: str | None = None,
    before_publish: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """A live agent's message to `model@machine` (or any bus address), as a new task on the bus. `sender`
    replaces the `from:` (default `<agent>@<alias>`, which the reply comes back to): `crosstalk send` uses it.
    `before_publish(message_id)` runs once the message's id is known and before it is committed (the shim
    journals an ask there); an exception from it aborts the send, nothing published."""
    from crosstalk.bus.protocol.message import BusMessage, new_message_name, render_message, utc_timestamp
    from crosstalk.bus.transport.store import publish

    try:
        validate_address(to)
        transport = pick_transport(_environ(paths, environ), cwd)
        channel = _live_channel(transport)
        name = new_message_name()
        who = sender or f"{agent}@{transport.alias}"
        msg = BusMessage(sender=who, to=to, timestamp=utc_timestamp(), body=text)
        files = {f"{channel.rel_dir}/{name}": render_message(msg)}
        if before_publish is not None:
            before_publish(bus_message_id(transport.name, channel.uuid, name))
        published = publish(transport, files, f"crosstalk: {agent} to {to}")
    except BusError as exc:
        return {"state": "unreachable", "reason": "bus_error", "detail": exc.message, "to": to}
    out: dict[str, Any] = {
        "state": "queued",
        "via": "bus",
        "to": to,
        "message_id": bus_message_id(transport.name, channel.uuid, name),
        "transport": transport.name,
        "channel": channel.name,
        "rel_path": f"{channel.rel_dir}/{name}",
        "pushed": published.pushed,
        "hint": "sent over the git bus; the reply arrives in your session as a message with in_reply_to = this "
        "message_id",
    }
    if published.push_error:
        out["push_error"] = published.push_error
    return out


def reply_from_live(
    paths: StatePaths,
    agent: str,
    tag: str,
    context_id: str,
    text: str,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """A live agent's reply to a bus message: a channel message `re:` it, addressed to its sender."""
    from crosstalk.bus.protocol.message import BusMessage, new_message_name, render_message, utc_timestamp
    from crosstalk.bus.transport.channels import find_channel
    from crosstalk.bus.transport.store import publish
    from crosstalk.bus.transport.transports import resolve_transport

    who = parse_sender_tag(tag)
    where = parse_context(context_id)
    if who is None or where is None:
        return {"state": "rejected", "reason": "not_a_bus_message"}
    transport_name, bus_sender = who
    channel_uuid, rel_path = where
    try:
        transport = resolve_transport(cwd or Path.cwd(), transport_name, _environ(paths, environ))
        channel = find_channel(transport.root, channel_uuid)
        name = new_message_name()
        msg = BusMessage(
            sender=f"{agent}@{transport.alias}",
            to=bus_sender,
            timestamp=utc_timestamp(),
            re=(rel_path,),
            body=text,
        )
        published = publish(
            transport, {f"{channel.rel_dir}/{name}": render_message(msg)}, f"crosstalk: {agent} replies"
        )
    except BusError as exc:
        return {"state": "unreachable", "reason": "bus_error", "detail": exc.message}
    out: dict[str, Any] = {
        "state": "replied",
        "via": "bus",
        "to": bus_sender,
        "message_id": bus_message_id(transport.name, channel.uuid, name),
        "rel_path": f"{channel.rel_dir}/{name}",
        "pushed": published.pushed,
    }
    if published.push_error:
        out["push_error"] = published.push_error
    return out


def is_bus_address(to: str) -> bool:
    """Whether `to` can only mean a bus address: live agent names never contain '@'."""
    actor, machine = split_address(to)
    return bool(machine) and bool(actor)
