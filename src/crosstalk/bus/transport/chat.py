"""A conversation with a bus model in one channel (`crosstalk chat`), free of any terminal: the channel it lives
in, one turn (a message `re:` the model's last reply, so the chain of the conversation is in the history), and the
wait for the reply, pulling the remote while it waits. The terminal side is crosstalk.cli.chat_cmd."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from crosstalk.bus.errors import BusError, ChannelError
from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.addressing import split_address
from crosstalk.bus.protocol.message import BusMessage, new_message_name, render_message, utc_timestamp
from crosstalk.bus.transport.channels import CHAT_CHANNEL_PREFIX, Channel, create_channel, find_channel
from crosstalk.bus.transport.store import PENDING, message_names, publish, read_message, replies_status, sync
from crosstalk.bus.transport.transports import Transport

POLL_S = 0.25  # between looks at the work tree for the reply
PULL_EVERY_S = 1.0  # between pulls of the remote while waiting (the local dispatcher pulls too)


@dataclass(frozen=True, slots=True)
class Line:
    """One message of the conversation as shown: who, what, and whether it is a failure."""

    sender: str
    body: str
    failed: bool = False
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    rel: str  # transport-relative path of the message sent
    reply: Line | None  # None: no reply within the wait
    reply_rel: str | None = None


def chat_channel_name(to: str) -> str:
    """`chat-<address>`, with what a channel name cannot hold replaced (one channel per addressee)."""
    return (CHAT_CHANNEL_PREFIX + re.sub(r"[^A-Za-z0-9._@-]+", "-", to))[:64]


def open_channel(transport: Transport, to: str, handle: str | None) -> Channel:
    """The named channel, or the addressee's chat channel (created on first use)."""
    if handle:
        return find_channel(transport.root, handle)
    name = chat_channel_name(to)
    try:
        return find_channel(transport.root, name)
    except ChannelError:
        pass
    try:
        return create_channel(transport, name)[0]
    except ChannelError:
        return find_channel(transport.root, name)  # created meanwhile by another chat


def history(transport: Transport, channel: Channel, limit: int = 10) -> list[Line]:
    """The channel's last `limit` messages, oldest first."""
    names = list(message_names(layout.channel_dir(transport.root, channel.uuid)))
    out = []
    for inner in names[-limit:] if limit else []:
        msg = read_message(transport.root, f"{channel.rel_dir}/{inner}")
        if msg is not None:
            out.append(Line(msg.sender, msg.body.rstrip(), msg.failed, msg.error))
    return out


def last_reply_from(transport: Transport, channel: Channel, to: str) -> str | None:
    """The channel-relative path of the newest message the addressee sent in the channel (what the next turn is
    `re:`), or None."""
    actor = split_address(to)[0]
    for inner in reversed(list(message_names(layout.channel_dir(transport.root, channel.uuid)))):
        msg = read_message(transport.root, f"{channel.rel_dir}/{inner}")
        if msg is not None and split_address(msg.sender)[0] == actor:
            return inner
    return None


def say(transport: Transport, channel: Channel, to: str, sender: str, text: str) -> str:
    """Commit and push one turn, `re:` the addressee's last reply in the channel; its transport-relative path."""
    last = last_reply_from(transport, channel, to)
    msg = BusMessage(sender=sender, to=to, timestamp=utc_timestamp(), re=(last,) if last else (), body=text)
    rel = f"{channel.rel_dir}/{new_message_name()}"
    publish(transport, {rel: render_message(msg)}, f"crosstalk: chat from {sender} to {to} in {channel.name}")
    return rel


def wait_reply(
    transport: Transport,
    rel: str,
    timeout: float,
    *,
    cancelled: Callable[[], bool] | None = None,
    tick: Callable[[float], None] | None = None,
) -> Turn:
    """Wait up to `timeout` seconds for the first reply to `rel` (pulling the remote every PULL_EVERY_S), or until
    `cancelled()` says stop; `tick` is called with the seconds waited so far, for a progress indicator. BusError
    when git fails. `cancelled` is polled, never waited on: a SIGINT handler may set what it reads (a signal
    handler that sets a threading.Event can deadlock on the Event's own lock, held by the waiting thread)."""
    started = time.monotonic()
    last_pull = started
    while True:
        waited = time.monotonic() - started
        [status] = replies_status(transport, [rel])
        if status.state != PENDING:
            first = status.replies[0]
            msg = read_message(transport.root, first.path)
            body = msg.body.rstrip() if msg is not None else ""
            return Turn(rel, Line(first.sender, body, first.failed, first.error), first.path)
        if waited >= timeout or (cancelled is not None and cancelled()):
            return Turn(rel, None)
        if tick is not None:
            tick(waited)
        if time.monotonic() - last_pull >= PULL_EVERY_S and transport.git().has_remote():
            try:
                sync(transport)
            except BusError:
                pass  # the remote is away for a moment: the local history is still read; the next pull retries
            last_pull = time.monotonic()
        time.sleep(POLL_S)
