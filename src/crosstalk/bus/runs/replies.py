"""The reply files a dispatcher writes (pure: no git, no clock beyond the timestamp and the file name).

A model's answer becomes one reply per distinct asker in the batch, `re:` listing that asker's messages, so every
asker is woken by exactly its own reply (the activation rule). A message no model can take (an ambiguous bare
name, an unreadable file, a live agent that refused it) gets a failed reply from the name it was addressed to.
"""

from __future__ import annotations

from collections.abc import Iterable

from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.message import BusMessage, new_message_name, render_message, utc_timestamp
from crosstalk.bus.runs.reader import ScannedMessage
from crosstalk.bus.runs.scan import Batch, Rejection


def _path(channel: str) -> str:
    return f"{layout.CHANNELS_DIR}/{channel}/{new_message_name()}"


def batch_replies(batch: Batch, alias: str, body: str, *, failed: str | None = None) -> dict[str, str]:
    """transport-relative path -> file text: the replies to one batch (failed ones carry `failed`/`error`)."""
    by_asker: dict[str, list[ScannedMessage]] = {}
    for item in batch.messages:
        by_asker.setdefault(item.msg.sender, []).append(item)
    files: dict[str, str] = {}
    for asker, items in by_asker.items():
        msg = BusMessage(
            sender=f"{batch.model.key}@{alias}",
            to=asker,
            timestamp=utc_timestamp(),
            re=tuple(m.rel for m in items),
            # The asker's wake_as: the persona it wants to wear when this reply wakes it.
            as_=next((m.msg.wake_as for m in items if m.msg.wake_as), None),
            failed=failed is not None,
            error=failed,
            body=body,
        )
        files[_path(batch.channel)] = render_message(msg)
    return files


def failed_replies(rejections: Iterable[Rejection], alias: str) -> dict[str, str]:
    """transport-relative path -> file text: one failed reply per rejected message (group)."""
    files: dict[str, str] = {}
    for item in rejections:
        msg = BusMessage(
            sender=f"{item.responder}@{alias}",
            to=item.sender,
            timestamp=utc_timestamp(),
            re=item.rels,
            failed=True,
            error=item.error,
            body=item.error,
        )
        files[_path(item.channel)] = render_message(msg)
    return files
