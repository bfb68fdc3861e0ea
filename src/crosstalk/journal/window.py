"""The bounds of an agent's in-memory state, and the dedupe window that outlives a settled message's body.

An agent keeps every message still owed something whole; of the settled ones (final delivery, nothing owed) only
the newest `MAX_SETTLED`. An older settled message keeps only its dedupe answer (message_id → sender key, final
state, reason, when it arrived) in the dedupe window: the newest `DEDUPE_WINDOW` of them, none older than the 24 h
retention. A retry of a message in the window is answered as the duplicate it is; a retry of a message older than
that (past the 24 h, or `DEDUPE_WINDOW` messages ago) is a new message, as it always was past retention.

Compaction writes the window into the journal as `checkpoint` records, each under the record cap, and drops the
records of the messages it holds: the file, like the memory, stays bounded by these numbers, not by the history.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

MAX_SETTLED = 1000  # settled messages (and terminal tasks, settled routes, ...) kept whole, the newest
DEDUPE_WINDOW = 20_000  # settled messages whose dedupe answer is kept after their body is let go, the newest
CHECKPOINT_CHUNK_BYTES = 256 * 1024  # one checkpoint record's entries, well under the journal's record cap
CHECKPOINT_CHUNK_ENTRIES = 1000  # entries a checkpoint record takes at most (about 110 KB of plain ids)


class Known(NamedTuple):
    dedupe_key: str | None
    state: str
    reason: str | None
    ts: float


class DedupeWindow:
    """message_id → Known, oldest first, at most `limit` of them."""

    __slots__ = ("_items", "limit")

    def __init__(self, limit: int = DEDUPE_WINDOW) -> None:
        self._items: OrderedDict[str, Known] = OrderedDict()
        self.limit = limit

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._items

    def get(self, message_id: str) -> Known | None:
        return self._items.get(message_id)

    def ids(self) -> set[str]:
        return set(self._items)

    def add(self, message_id: str, dedupe_key: str | None, state: str, reason: str | None, ts: float) -> None:
        # One copy of each sender's key however many of its messages the window holds (docs/dev/shim-memory.md).
        key = None if dedupe_key is None else sys.intern(dedupe_key)
        self._items[message_id] = Known(key, state, reason, ts)
        self._items.move_to_end(message_id)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def forget(self, message_ids: Iterable[str]) -> None:
        """Forget these ids' answers (those it holds)."""
        for mid in message_ids:
            self._items.pop(mid, None)

    def expire(self, cutoff: float) -> None:
        """Forget answers older than `cutoff` (retention's)."""
        for mid in [m for m, k in self._items.items() if k.ts < cutoff]:
            del self._items[mid]

    def load(self, entries: Any, *, skip: Iterable[str] = ()) -> int:
        """Fold in a checkpoint record's entries (flat: five values an entry, see `snapshot`); a malformed entry
        (outside damage) is skipped. Returns how many were taken."""
        if not isinstance(entries, list):
            return 0
        taken = 0
        for i in range(0, len(entries) - len(entries) % 5, 5):
            mid, key, state, reason, ts = entries[i : i + 5]
            if (
                isinstance(mid, str)
                and isinstance(key, str | None)
                and isinstance(state, str)
                and isinstance(reason, str | None)
                and isinstance(ts, int | float)
                and not isinstance(ts, bool)
                and mid not in skip
            ):
                self.add(mid, key, state, reason, float(ts))
                taken += 1
        return taken

    def snapshot(self) -> list[list[Any]]:
        """The entries, oldest first: [message_id, dedupe_key, state, reason, ts] each."""
        return [[mid, k.dedupe_key, k.state, k.reason, k.ts] for mid, k in self._items.items()]

    def flat(self) -> list[Any]:
        """The entries, oldest first, as checkpoint records carry them: five values an entry in one list. What a
        compaction takes of the window: one list of references, not a list per entry (those small lists, up to
        `DEDUPE_WINDOW` of them, were allocated among the agent's live objects and left its heap larger at each
        compaction: docs/dev/shim-memory.md)."""
        out: list[Any] = []
        for mid, known in self._items.items():
            out.append(mid)
            out.extend(known)  # dedupe_key, state, reason, ts: Known's order
        return out


def fresh_entries(flat: list[Any], cutoff: float) -> list[Any]:
    """The flat entries (`DedupeWindow.flat`) whose time is `cutoff` or later, still flat."""
    if all(flat[i] >= cutoff for i in range(4, len(flat), 5)):
        return flat
    out: list[Any] = []
    for i in range(0, len(flat) - len(flat) % 5, 5):
        if flat[i + 4] >= cutoff:
            out.extend(flat[i : i + 5])
    return out


def checkpoint_chunks(flat: list[Any]) -> list[list[Any]]:
    """A window's entries (flat, five values an entry: `DedupeWindow.flat`) as checkpoint records carry them: flat
    (no list per entry, so a replay parses a checkpoint fast), in groups whose JSON stays under
    CHECKPOINT_CHUNK_BYTES each."""
    step = 5 * CHECKPOINT_CHUNK_ENTRIES
    whole = len(flat) - len(flat) % 5
    chunks: list[list[Any]] = []
    pending = [(i, min(i + step, whole)) for i in range(0, whole, step)]
    pending.reverse()
    while pending:
        lo, hi = pending.pop()
        group = flat[lo:hi]
        if hi - lo > 5 and len(json.dumps(group, ensure_ascii=False).encode("utf-8")) > CHECKPOINT_CHUNK_BYTES:
            mid = lo + (hi - lo) // 10 * 5  # long keys or reasons: split until each half fits
            pending += [(mid, hi), (lo, mid)]
            continue
        chunks.append(group)
    return chunks


def trim_settled(
    table: dict[str, Any],
    keep: int,
    settled: Callable[[str, Any], bool],
    let_go: Callable[[str, Any], None] | None = None,
) -> int:
    """Remove the oldest settled items of `table` (insertion order) until at most `keep` remain or none of the
    rest is settled. Returns how many were removed."""
    excess = len(table) - keep
    if excess <= 0:
        return 0
    gone = []
    for key, value in table.items():
        if settled(key, value):
            gone.append((key, value))
            if len(gone) == excess:
                break
    for key, value in gone:
        del table[key]
        if let_go is not None:
            let_go(key, value)
    return len(gone)
