"""Channels: UUID directories under data/channels/ with a CHANNEL.md naming them (create/list/find/rename/delete)."""

from __future__ import annotations

import os
import re
import shutil
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from crosstalk.bus.errors import ChannelError, UnsafeFile
from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.safefs import TEXT_LIMIT, load_yaml, read_transport_text
from crosstalk.bus.transport.store import PublishResult, publish
from crosstalk.bus.transport.transports import Transport

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
MAX_NAME_CHARS = 64
CHAT_CHANNEL_PREFIX = "chat-"  # `crosstalk chat`'s channel per addressee (bus/transport/chat.py)
LIVE_CHANNEL_PREFIX = "live-"  # the bridge's channel for live agents' bus traffic (bus/live/bridge.py)


@dataclass(frozen=True, slots=True)
class Channel:
    uuid: str
    name: str
    parent: str | None = None

    @property
    def rel_dir(self) -> str:
        return f"{layout.CHANNELS_DIR}/{self.uuid}"

    @property
    def made_by_crosstalk(self) -> bool:
        """A channel crosstalk made for its own traffic: a workflow's child channel (it has a parent), a chat's, or
        the bridge's. Never the default a command picks when none is named."""
        return self.parent is not None or self.name.startswith((CHAT_CHANNEL_PREFIX, LIVE_CHANNEL_PREFIX))

    def to_json(self) -> dict[str, object]:
        return {"uuid": self.uuid, "name": self.name, "parent": self.parent, "path": self.rel_dir}


def validate_channel_name(name: str) -> str:
    """1-64 characters, no '/', no line breaks or control characters, not shaped like a UUID (handles stay unique)."""
    if not name or not name.strip():
        raise ChannelError("a channel name must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise ChannelError(f"channel name is {len(name)} characters; the limit is {MAX_NAME_CHARS}")
    if "/" in name:
        raise ChannelError(f"channel name {name!r} must not contain '/'")
    if any(ord(ch) < 32 or ch == "\x7f" for ch in name):
        raise ChannelError(f"channel name {name!r} must not contain line breaks or control characters")
    if name != name.strip():
        raise ChannelError(f"channel name {name!r} must not start or end with whitespace")
    if UUID_RE.match(name):
        raise ChannelError(f"channel name {name!r} looks like a UUID; pick a name that cannot be mistaken for one")
    return name


def render_channel(name: str, parent: str | None = None) -> str:
    meta: dict[str, Any] = {"name": name}
    if parent:
        meta["parent"] = parent
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1 << 30)
    return f"---\n{head}---\n"


def parse_channel(text: str, uuid: str) -> Channel | None:
    """The channel a CHANNEL.md describes, or None when it is malformed."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return None
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        meta = load_yaml("\n".join(lines[1:end]), layout.CHANNEL_FILE)  # aliases refused
    except Exception:  # StopIteration or any YAML/constructor error: not a usable CHANNEL.md
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str | int | float):
        return None
    parent = meta.get("parent")
    return Channel(uuid, str(meta["name"]), str(parent) if parent else None)


def list_channels(root: Path) -> list[Channel]:
    """Every channel of the transport with a readable CHANNEL.md, sorted by name."""
    base = Path(root) / layout.CHANNELS_DIR
    out: list[Channel] = []
    try:
        entries = list(os.scandir(base))
    except FileNotFoundError:
        return out
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False) or not UUID_RE.match(entry.name):
            continue
        try:
            rel = f"{layout.CHANNELS_DIR}/{entry.name}/{layout.CHANNEL_FILE}"
            text = read_transport_text(root, rel, TEXT_LIMIT)
        except (OSError, UnicodeDecodeError, UnsafeFile):
            continue
        channel = parse_channel(text, entry.name)
        if channel is not None:
            out.append(channel)
    return sorted(out, key=lambda c: (c.name, c.uuid))


def _names(channels: list[Channel]) -> str:
    return ", ".join(c.name for c in channels) or "none"


def find_channel(root: Path, handle: str) -> Channel:
    """The channel named handle, or whose UUID is handle; ChannelError listing the channels otherwise."""
    channels = list_channels(root)
    if UUID_RE.match(handle):
        for channel in channels:
            if channel.uuid.lower() == handle.lower():
                return channel
    else:
        for channel in channels:
            if channel.name == handle:
                return channel
    raise ChannelError(f"no channel {handle!r} (channels: {_names(channels)})")


def _check_free(root: Path, name: str, *, except_uuid: str | None = None) -> None:
    for channel in list_channels(root):
        if channel.name == name and channel.uuid != except_uuid:
            raise ChannelError(f"a channel named {name!r} already exists ({channel.uuid})")


def create_channel(transport: Transport, name: str, parent: str | None = None) -> tuple[Channel, PublishResult]:
    validate_channel_name(name)
    parent_uuid = find_channel(transport.root, parent).uuid if parent else None
    channel = Channel(str(uuidlib.uuid4()), name, parent_uuid)
    result = publish(
        transport,
        {f"{channel.rel_dir}/{layout.CHANNEL_FILE}": render_channel(name, parent_uuid)},
        f"crosstalk: create channel {name}",
        precheck=lambda: _check_free(transport.root, name),
    )
    return channel, result


def rename_channel(transport: Transport, handle: str, new_name: str) -> tuple[Channel, PublishResult]:
    validate_channel_name(new_name)
    old = find_channel(transport.root, handle)
    if old.name == new_name:
        raise ChannelError(f"channel {old.name!r} already has that name")
    channel = Channel(old.uuid, new_name, old.parent)
    result = publish(
        transport,
        {f"{channel.rel_dir}/{layout.CHANNEL_FILE}": render_channel(new_name, old.parent)},
        f"crosstalk: rename channel {old.name} to {new_name}",
        precheck=lambda: _check_free(transport.root, new_name, except_uuid=old.uuid),
    )
    return channel, result


def delete_channel(transport: Transport, handle: str) -> tuple[Channel, PublishResult]:
    """Remove the channel's directory in one commit (git rm -r). Confirmation is the caller's job."""
    channel = find_channel(transport.root, handle)

    def still_there() -> None:
        if not (transport.root / channel.rel_dir).is_dir():
            raise ChannelError(f"channel {channel.name!r} was deleted meanwhile")

    result = publish(
        transport, {}, f"crosstalk: delete channel {channel.name}", remove=[channel.rel_dir], precheck=still_there
    )
    # git rm leaves untracked leftovers (an interrupted write); the channel is gone, so are they.
    shutil.rmtree(transport.root / channel.rel_dir, ignore_errors=True)
    return channel, result
