"""Shared scaffold for the task-service tests: one Rig, one started TaskService, both always closed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from crosstalk.tasks.service import TaskService
from tests.support.receiver import Rig, run


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
