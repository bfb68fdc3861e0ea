"""Retention (ARCHITECTURE.md §6): drop records older than 24 h, except the whole dependency set of any
unresolved work: the original bodies, dedupe records, routes, obligations and tasks that still matter.

Records are grouped by the ids they mention (message_id, in_reply_to, task_id); a group is kept whole when any of
its records is recent or any of its ids is unresolved. The latest claim record is always kept: it is the agent's
current role.
"""

from __future__ import annotations

import time
from typing import Any

from crosstalk.journal import records as R

RETENTION_SECONDS = 24 * 3600


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
) -> list[dict[str, Any]]:
    """The records to keep, in their original order."""
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
        if ids and float(rec.get("ts", 0)) >= cutoff:
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
