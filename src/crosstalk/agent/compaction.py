"""Keeping a running agent's journal bounded: the retention rule (journal/retention.py) applied every
`retention_interval_s`, and sooner once the journal has grown by `compact_after_bytes` since the last compaction,
so its size (and a restart's replay) stays bounded however fast messages come. What a compaction dropped from the
journal is forgotten in memory too: the journal's state and the task service's terminal tasks.

Compaction must never take the agent down: a failed round is logged and the next one tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from crosstalk.fs.memory import release_freed_memory
from crosstalk.journal import Journal, JournalState
from crosstalk.journal.retention import RETENTION_SECONDS, Plan, select_lines
from crosstalk.tasks.service import TaskService

log = logging.getLogger(__name__)


class Compactor:
    """The journal upkeep of one agent. `start()` begins the periodic rounds; `on_message` is a receiver listener
    (it starts a compaction when the journal has grown enough); `stop()` ends both."""

    def __init__(
        self,
        journal: Journal,
        state: JournalState,
        tasks: TaskService,
        *,
        interval_s: float,
        after_bytes: int,
        compacted_size: int,
        name: str,
    ) -> None:
        self.journal, self.state, self.tasks = journal, state, tasks
        self.interval_s, self.after_bytes, self.name = interval_s, after_bytes, name
        self._compacted_size = compacted_size  # the journal's size after the last compaction
        self._rounds: asyncio.Task[None] | None = None
        self._growth: asyncio.Task[Any] | None = None  # a compaction the journal's growth started
        self._stopped = False

    def start(self) -> None:
        self._rounds = asyncio.create_task(self._retention_loop(), name=self.name)

    async def stop(self) -> None:
        self._stopped = True
        for task in (self._rounds, self._growth):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._rounds = self._growth = None

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self._compact_logged()

    def on_message(self, *_: object) -> None:
        """After each message: compact now, rather than at the next round, once the journal has grown by
        `after_bytes` since the last compaction."""
        if self._stopped or self.journal.size - self._compacted_size < self.after_bytes:
            return
        if self._growth is None or self._growth.done():
            self._growth = asyncio.get_running_loop().create_task(self._compact_logged())

    async def _compact_logged(self) -> None:
        try:
            await self.compact()
        except Exception:  # retention must never take the agent down; the next round tries again
            log.exception("journal compaction failed")

    async def compact(self, *, now: float | None = None) -> tuple[int, int]:
        """Apply the retention rule to the live journal (settled messages the state let go of collapse into the
        checkpoint) and forget in memory what it dropped. Returns (records before, records after)."""
        now = time.time() if now is None else now
        plan = Plan.of(self.state)  # taken here, on the loop: the flusher thread that reads the journal never reads it
        gone_tasks = self.state.gone_tasks.ids()  # in the plan's `collapsed`: their records are dropped
        kept_ids: set[str] = set()
        self._compacted_size = self.journal.size  # no second growth compaction while this one is queued

        def choose(records: Iterator[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
            # One record at a time, none kept: the journal is never in memory as records (retention.select_lines).
            head, kept, ids = select_lines(records, plan, now=now)
            kept_ids.update(ids)
            return head, kept

        before, after = await asyncio.wrap_future(self.journal.compact_lines(choose))
        self._compacted_size = self.journal.size
        if after < before:
            self.state.prune(kept_ids, now - RETENTION_SECONDS)
            self.tasks.prune(kept_ids, now - RETENTION_SECONDS)
        # A terminal task let go is remembered only so that compaction drops its records; once one has (no kept
        # record names it), nothing needs it. Without this the set grew by one task per message up to the window's
        # 20,000 (docs/dev/shim-memory.md). A task let go after the plan was taken stays for the next round.
        self.state.gone_tasks.forget(gone_tasks - kept_ids)
        release_freed_memory()
        return before, after
