"""The dispatch worker ends when it is closed, even when the cancel comes in the same step as the harness's answer:
Python 3.11's asyncio.wait_for then returns the answer and drops the cancel, and an adapter may use it. Before, the
worker went back to its queue with the cancel lost and close() waited on it for good (a test passed only when its
own 60 s bound cancelled the closer, whose cancel close() then swallowed too)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from crosstalk.harness.base import InjectRequest, InjectResult
from crosstalk.harness.fake.adapter import FakeHarness
from crosstalk.tasks.service import TaskService
from tests.support.receiver import CAROL, Rig, msg, wait_for
from tests.support.tasks import run_with_service

CLOSE_BOUND_S = 5.0


class WaitForHarness(FakeHarness):
    """A fake whose inject waits for its answer under asyncio.wait_for, as an adapter may."""

    def __init__(self) -> None:
        super().__init__([], default="accept")
        self.answer_ready = asyncio.Event()
        self.waiting = asyncio.Event()

    async def inject(self, request: InjectRequest) -> InjectResult:
        self.waiting.set()
        await asyncio.wait_for(self.answer_ready.wait(), 60)
        return await super().inject(request)


def test_a_cancel_arriving_with_the_harness_answer_still_ends_the_worker(root: Path) -> None:
    fake = WaitForHarness()

    async def body(rig: Rig, svc: TaskService) -> None:
        await svc.send(CAROL, msg("first"), task_id=None, return_immediately=True)
        await wait_for(fake.waiting)
        worker = svc.worker._task
        assert worker is not None
        fake.answer_ready.set()  # the answer, and next the cancel, in one event-loop step
        closer = asyncio.create_task(svc.worker.close())
        await wait_for(worker.done, CLOSE_BOUND_S)  # ended by close()'s one cancel, nothing else
        await asyncio.wait_for(closer, CLOSE_BOUND_S)

    run_with_service(root, body, fake=fake)
