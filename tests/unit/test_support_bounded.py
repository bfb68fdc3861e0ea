"""run_bounded (tests/support/bounded.py): a body that ends in time passes; one that overruns its bound fails, also
when it swallows the cancel (returning late, raising late or never ending); the loop's shutdown is bounded too, and
a process the stuck body started is killed. Each overrunning body waits on an event nobody sets, so it overruns
whatever the machine's speed; the bounds are tiny and no test asserts a time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.support.bounded import BodyOverran, run_bounded

TESTS = Path(__file__).resolve().parents[1]

BOUND_S = 0.01
GRACE_S = 0.05


async def never() -> None:
    await asyncio.Event().wait()


async def stubborn() -> None:
    """Swallows every cancel: only the end of the loop ends it (a thousand are more than any test sends)."""
    for _ in range(1000):
        with contextlib.suppress(asyncio.CancelledError):
            await never()


def test_a_body_that_finishes_gives_its_result_as_coroutine_or_factory() -> None:
    async def body() -> int:
        await asyncio.sleep(0)
        return 7

    assert run_bounded(body(), 10) == 7
    assert run_bounded(body, 10) == 7


def test_a_body_s_own_failure_comes_through_as_it_is() -> None:
    async def body() -> None:
        raise ValueError("mine")

    with pytest.raises(ValueError, match="mine"):
        run_bounded(body, 10)


def test_a_body_that_overruns_and_honours_the_cancel_fails_naming_it_and_the_bound() -> None:
    cleaned: list[bool] = []

    async def body() -> None:
        try:
            await never()
        finally:
            cleaned.append(True)

    with pytest.raises(BodyOverran, match=r"^slow body ran past its bound of 0\.01 s$"):
        run_bounded(body, BOUND_S, what="slow body", grace=GRACE_S)
    assert cleaned == [True]


def test_a_body_that_swallows_the_cancel_and_returns_late_fails() -> None:
    async def body() -> str:
        with contextlib.suppress(asyncio.CancelledError):
            await never()
        return "as if it passed"

    with pytest.raises(
        BodyOverran, match=r"body ran past its bound of 0\.01 s, swallowed the cancel and returned late$"
    ):
        run_bounded(body, BOUND_S, grace=GRACE_S)


def test_a_body_that_swallows_the_cancel_and_raises_late_fails_as_an_overrun() -> None:
    async def body() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await never()
        raise ValueError("after the bound")

    with pytest.raises(BodyOverran, match="swallowed the cancel and raised late") as caught:
        run_bounded(body, BOUND_S, grace=GRACE_S)
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_body_that_swallows_every_cancel_and_never_ends_fails_at_the_hard_stop() -> None:
    cancels: list[bool] = []

    async def body() -> None:
        while len(cancels) < 1000:  # bounded all the same; only the hard stop ends it here
            try:
                await never()
            except asyncio.CancelledError:
                cancels.append(True)

    with pytest.raises(BodyOverran) as caught:
        run_bounded(body, BOUND_S, what="stuck", grace=GRACE_S)
    message = str(caught.value)
    assert message.startswith("stuck ran past its bound of 0.01 s and did not end within 0.05 s of the cancel")
    assert "tasks that ignored their cancel" in message
    assert len(cancels) == 2  # the bound's cancel, then the shutdown's: both swallowed, and the loop stopped anyway


def test_a_process_the_stuck_body_started_is_killed() -> None:
    procs: list[subprocess.Popen[bytes]] = []

    async def body() -> None:
        procs.append(subprocess.Popen(["sleep", "60"]))
        await stubborn()

    try:
        with pytest.raises(BodyOverran, match="killed process") as caught:
            run_bounded(body, BOUND_S, grace=GRACE_S)
        assert f"killed process {procs[0].pid} it left running" in str(caught.value)
        assert procs[0].wait(timeout=10) == -signal.SIGKILL
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def test_a_task_left_behind_that_ignores_its_cancel_fails_the_shutdown() -> None:
    left: list[asyncio.Task[None]] = []

    async def body() -> None:
        left.append(asyncio.create_task(stubborn(), name="stubborn"))
        await asyncio.sleep(0)

    with pytest.raises(BodyOverran, match=r"body ended, but its loop did not shut down within 0\.05 s: .*stubborn"):
        run_bounded(body, 10, grace=GRACE_S)


def test_a_failing_body_whose_shutdown_sticks_fails_with_its_own_error_and_a_note() -> None:
    left: list[asyncio.Task[None]] = []

    async def body() -> None:
        left.append(asyncio.create_task(stubborn(), name="stubborn"))
        await asyncio.sleep(0)
        raise ValueError("mine")

    with pytest.raises(ValueError, match="mine") as caught:
        run_bounded(body, 10, grace=GRACE_S)
    assert any("did not shut down" in note for note in caught.value.__notes__)


def test_on_another_thread_it_kills_only_what_that_thread_started() -> None:
    procs: list[subprocess.Popen[bytes]] = []
    outcome: list[BaseException] = []

    async def body() -> None:
        procs.append(subprocess.Popen(["sleep", "60"]))
        await stubborn()

    def side() -> None:
        try:
            run_bounded(body, BOUND_S, grace=GRACE_S)
        except BaseException as exc:
            outcome.append(exc)

    bystander = subprocess.Popen(["sleep", "60"])  # the main thread's own: left alone
    try:
        thread = threading.Thread(target=side)
        thread.start()
        thread.join(30)
        assert not thread.is_alive()
        assert [type(e) for e in outcome] == [BodyOverran]
        assert f"killed process {procs[0].pid} it left running" in str(outcome[0])
        assert str(bystander.pid) not in str(outcome[0]) and bystander.poll() is None
        assert procs[0].wait(timeout=10) == -signal.SIGKILL
    finally:
        for proc in [*procs, bystander]:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def test_no_test_bounds_a_body_with_asyncio_run_of_wait_for() -> None:
    needle = "asyncio.run(" + "asyncio.wait_for("  # split, so this file does not match itself
    found = [str(p.relative_to(TESTS)) for p in sorted(TESTS.rglob("*.py")) if needle in p.read_text()]
    assert found == ["support/bounded.py"]  # its docstring, saying why
