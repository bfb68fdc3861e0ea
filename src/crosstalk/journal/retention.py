"""Retention: drop journal records older than 24 h, except the whole dependency set of any
unresolved work: the original bodies, dedupe records, routes, obligations and tasks that still matter.

Records are grouped by the ids they mention (message_id, in_reply_to, task_id); a group is kept whole when any of
its records is recent or any of its ids is unresolved. The latest claim record is always kept: it is the agent's
current role.

Recent is not enough to keep a settled message the agent has let go of (journal/window.py): its dedupe answer goes
into checkpoint records at the head of the file, and its own records go (`compact_records`), so a journal holds
what the agent holds in memory, not its whole day.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crosstalk.journal import records as R
from crosstalk.journal.window import checkpoint_chunks, fresh_entries

if TYPE_CHECKING:
    from crosstalk.journal.replay import JournalState

RETENTION_SECONDS = 24 * 3600
APPLY_MARGIN_S = 120.0  # far past the longest an append waits (writer.APPEND_TIMEOUT_S) before it is applied


def _ids_of(rec: dict[str, Any]) -> list[str]:
    ids: list[str] = []
    for key in ("message_id", "task_id", "in_reply_to", "reply_id"):
        value = rec.get(key)
        if isinstance(value, str):
            ids.append(value)
    msg = rec.get("message")
    if isinstance(msg, dict):
        for key in ("message_id", "in_reply_to", "task_id"):
            value = msg.get(key)
            if isinstance(value, str):
                ids.append(value)
    return ids


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def select_retained(
    records: list[dict[str, Any]],
    unresolved_ids: set[str],
    *,
    now: float | None = None,
    window_s: float = RETENTION_SECONDS,
    collapsed: set[str] | frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """The records to keep, in their original order. A recent record whose ids are all `collapsed` (settled and
    summarized elsewhere) does not keep its group."""
    now = time.time() if now is None else now
    cutoff = now - window_s
    uf = _UnionFind()
    rec_ids: list[list[str]] = []
    for rec in records:
        ids = _ids_of(rec)
        rec_ids.append(ids)
        if ids:
            uf.find(ids[0])  # register it: a record that mentions a single id must still be found by its id
        for other in ids[1:]:
            uf.union(ids[0], other)
    keep_roots: set[str] = {uf.find(i) for i in unresolved_ids if i in uf.parent}
    for rec, ids in zip(records, rec_ids, strict=True):
        if ids and float(rec.get("ts", 0)) >= cutoff and not all(i in collapsed for i in ids):
            keep_roots.add(uf.find(ids[0]))
    last_claim = max((i for i, r in enumerate(records) if r.get("type") == R.CLAIM), default=-1)
    kept: list[dict[str, Any]] = []
    for i, (rec, ids) in enumerate(zip(records, rec_ids, strict=True)):
        if i == last_claim:
            kept.append(rec)
        elif ids:
            if uf.find(ids[0]) in keep_roots:
                kept.append(rec)
        elif float(rec.get("ts", 0)) >= cutoff:
            kept.append(rec)
    return kept


def ids_in(records: list[dict[str, Any]]) -> set[str]:
    """Every id the records mention: what a compaction kept, for pruning the in-memory state to match."""
    return {i for rec in records for i in _ids_of(rec)}


@dataclass(frozen=True, slots=True)
class Plan:
    """What compaction needs of the agent's state, taken on its event loop before the flusher thread compacts."""

    unresolved: set[str]  # whose whole dependency set stays
    collapsed: set[str]  # settled ids the state let go of: their records go, whatever their age
    present: set[str]  # the messages and tasks the state holds
    window_entries: list[Any]  # the dedupe window, for the checkpoint records: flat (DedupeWindow.flat)
    taken_at: float

    @classmethod
    def of(cls, state: JournalState) -> Plan:
        return cls(
            state.unresolved_ids(),
            state.collapsible_ids(),
            set(state.messages) | set(state.tasks),
            state.window.flat(),
            time.time(),
        )

    def forgotten(self, records: list[dict[str, Any]]) -> set[str]:
        """Messages and tasks in `records` the state no longer holds at all (let go, then past the window's count):
        their records go too. Only records older than a margin count: a record just written may not be applied
        to the state yet."""
        settled_before = self.taken_at - APPLY_MARGIN_S
        ids: set[str] = set()
        for rec in records:
            rtype = rec.get("type")
            if rtype not in (R.RECEIVED, R.TASK) or float(rec.get("ts", 0)) >= settled_before:
                continue
            rid = R.message_id_of(rec) if rtype == R.RECEIVED else rec.get("task_id")
            if isinstance(rid, str) and rid not in self.present:
                ids.add(rid)
        return ids


def compact_records(
    records: list[dict[str, Any]], plan: Plan, *, now: float | None = None, window_s: float = RETENTION_SECONDS
) -> list[dict[str, Any]]:
    """The compacted journal: checkpoint records of the dedupe window (its entries within retention) first, then
    the retained records without the old checkpoints and without the records of collapsed or forgotten ids."""
    now = time.time() if now is None else now
    rest = [r for r in records if r.get("type") != R.CHECKPOINT]
    collapsed = plan.collapsed | plan.forgotten(rest)
    kept = select_retained(rest, plan.unresolved, now=now, window_s=window_s, collapsed=collapsed)
    fresh = fresh_entries(plan.window_entries, now - window_s)
    return [R.checkpoint(chunk) for chunk in checkpoint_chunks(fresh)] + kept


def select_lines(
    records: Iterable[dict[str, Any]], plan: Plan, *, now: float | None = None, window_s: float = RETENTION_SECONDS
) -> tuple[list[dict[str, Any]], list[int], set[str]]:
    """`compact_records`, reading each record once and keeping none of them: a live compaction's memory is a few
    numbers per record and each id once, not the journal (Journal.compact_lines; docs/dev/shim-memory.md). Returns
    the checkpoint records that head the compacted journal, the positions in `records` of the records kept (in
    order), and every id the kept records mention (`ids_in`)."""
    now = time.time() if now is None else now
    cutoff = now - window_s
    settled_before = plan.taken_at - APPLY_MARGIN_S
    number: dict[str, int] = {}  # each id, once, as a number; names[n] is the id numbered n
    names: list[str] = []
    parent = array("q")  # union-find over the numbers: records that share an id are one group

    def num(i: str) -> int:
        n = number.get(i)
        if n is None:
            n = number[i] = len(names)
            names.append(i)
            parent.append(n)
        return n

    def find(n: int) -> int:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    positions, times = array("q"), array("d")  # of each record that is not a checkpoint
    first, flat = array("q"), array("q")  # its ids: flat[first[k]:first[k + 1]]
    last_claim, forgotten = -1, set()
    for pos, rec in enumerate(records):
        rtype = rec.get("type")
        if rtype == R.CHECKPOINT:
            continue
        ts = float(rec.get("ts", 0))
        if rtype == R.CLAIM:
            last_claim = len(times)
        positions.append(pos)
        times.append(ts)
        first.append(len(flat))
        ids = [num(i) for i in _ids_of(rec)]
        flat.extend(ids)
        for other in ids[1:]:
            ra, rb = find(ids[0]), find(other)
            if ra != rb:
                parent[rb] = ra
        if rtype in (R.RECEIVED, R.TASK) and ts < settled_before:  # Plan.forgotten
            rid = R.message_id_of(rec) if rtype == R.RECEIVED else rec.get("task_id")
            if isinstance(rid, str) and rid not in plan.present:
                forgotten.add(rid)
    first.append(len(flat))
    collapsed = plan.collapsed | forgotten
    keep_roots = {find(number[i]) for i in plan.unresolved if i in number}
    for k, ts in enumerate(times):
        group = flat[first[k] : first[k + 1]]
        if group and ts >= cutoff and not all(names[n] in collapsed for n in group):
            keep_roots.add(find(group[0]))
    kept: list[int] = []
    kept_ids: set[str] = set()
    for k, ts in enumerate(times):
        group = flat[first[k] : first[k + 1]]
        if k == last_claim or (find(group[0]) in keep_roots if group else ts >= cutoff):
            kept.append(positions[k])
            kept_ids.update(names[n] for n in group)
    fresh = fresh_entries(plan.window_entries, now - window_s)
    return [R.checkpoint(chunk) for chunk in checkpoint_chunks(fresh)], kept, kept_ids
