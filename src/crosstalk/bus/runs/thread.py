"""The thread a batch answers: the messages its `re:` links lead back to in the same channel, for the prompt's
"Earlier in this thread" section. A headless model run remembers nothing between runs, so a reply to a reply (a
chat turn, an answer to a model's question) would otherwise reach it without the conversation it continues.

Bounded both ways: at most THREAD_MESSAGES messages, nearest first, within THREAD_BYTES of bodies; every read is
the store's (a regular file inside the transport, never through a symlink, capped). Unreadable links are skipped:
context is a courtesy, never a reason to fail a dispatch."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path

from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.layout import is_safe_relpath
from crosstalk.bus.runs.prompt import PromptItem
from crosstalk.bus.runs.reader import ScannedMessage
from crosstalk.bus.transport.store import read_message

THREAD_MESSAGES = 8
THREAD_BYTES = 32 << 10


def earlier_in_thread(root: Path, channel: str, messages: Sequence[ScannedMessage]) -> list[PromptItem]:
    """The earlier messages of the batch's thread, oldest first (message names sort by time); none of the batch's
    own messages."""
    seen = {m.rel for m in messages}
    frontier = deque(rel for m in messages for rel in m.msg.re)
    nearest: list[PromptItem] = []
    used = 0
    while frontier and len(nearest) < THREAD_MESSAGES:
        rel = frontier.popleft()
        if rel in seen or not is_safe_relpath(rel):
            continue
        seen.add(rel)
        msg = read_message(root, f"{layout.CHANNELS_DIR}/{channel}/{rel}")
        if msg is None:
            continue
        used += len(msg.body.encode())
        if used > THREAD_BYTES:
            break
        nearest.append(PromptItem(msg.sender, rel, msg.body))
        frontier.extend(msg.re)
    return sorted(nearest, key=lambda item: item.ref)
