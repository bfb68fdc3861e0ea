"""Shared scaffold for the task-service tests: one Rig, one started TaskService, both always closed; a crash and a
restart on the same journal; a journal write held while the test acts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crosstalk.journal import JournalError, JournalState
from crosstalk.receiver import Receiver
from crosstalk.tasks.service import TaskService
from crosstalk.tasks.worker import DispatchWorker
from tests.support.receiver import Rig, run, settle

Records = list[dict[str, Any]]


def run_with_service(
    root: Path,
    body: Callable[[Rig, TaskService], Awaitable[None]],
    *,
    setup: Callable[[Rig, TaskService], None] | None = None,
    **rig_kwargs: Any,
) -> None:
    """Build a Rig in `root`, start a TaskService over it (after `setup`, if given), run `body(rig, svc)`,
    then close the service and the rig whatever happens."""
    rig = Rig(root, **rig_kwargs)

    async def scaffold() -> None:
        svc = TaskService(rig.receiver)
        if setup is not None:
            setup(rig, svc)
        await svc.start()
        try:
            await body(rig, svc)
        finally:
            await svc.close()

    try:
        run(scaffold(), what=getattr(body, "__qualname__", None))
    finally:
        rig.close()


def crash(worker: DispatchWorker) -> None:
    """Stop the worker at once, whatever it is dispatching: a crash without the outcome written."""
    if worker._task is not None:
        worker._task.cancel()


async def restarted(
    rig: Rig, records: Records, before_start: Callable[[TaskService], Awaitable[None]] | None = None
) -> TaskService:
    """A task service started as an agent restarts: the journal replayed and reconciled, then the tasks loaded.
    `before_start`: what happens after the load and before the start (the agent's socket answers by then)."""
    receiver = Receiver(rig.identity, rig.journal, JournalState.replay(records), rig.fake, rig.view)
    receiver.reconcile()
    svc = TaskService(receiver)
    svc.load(records)
    if before_start is not None:
        await before_start(svc)
    await svc.start()
    return svc


@dataclass
class Hold:
    """A journal write held before it is written: `reached` once it is, then written when the test sets `go`, or
    failed when it set `fail` first."""

    reached: asyncio.Event = field(default_factory=asyncio.Event)
    go: asyncio.Event = field(default_factory=asyncio.Event)
    fail: bool = False


def hold_records(rig: Rig, which: Callable[[Records], bool]) -> Hold:
    """Hold the first journal write that `which` picks."""
    record = rig.receiver.record
    hold = Hold()

    async def held_record(records: Records) -> None:
        if not hold.reached.is_set() and which(records):
            hold.reached.set()
            await settle(hold.go.wait())
            if hold.fail:
                raise JournalError("injected: the held record is not durable")
        await record(records)

    rig.receiver.record = held_record  # type: ignore[method-assign]
    return hold
