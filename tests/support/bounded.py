"""Run one async test body in a fresh event loop under a bound it cannot hide from.

`asyncio.run(asyncio.wait_for(body(), T))` has two holes on Python 3.11: wait_for returns a result that arrives in
the same loop step as its cancel (the overrun passes), and a body that swallows its cancel (a close() waiting on
something stuck) either returns late as if it passed or keeps asyncio.run waiting for good. run_bounded closes both:

- the body runs under `asyncio.timeout(seconds)`; overrunning it fails the test (BodyOverran, an AssertionError
  naming the body and the bound), also when the body swallowed the cancel and returned or raised after the bound;
- the loop itself has a hard stop `grace` seconds after the bound: a body still running then is abandoned and the
  test fails. The leftover tasks are cancelled once more, and any process started during the call that still
  lives is killed by PID; threads cannot be killed, so one still running is named in the failure;
- what follows the body is bounded by one more `grace`: the loop's own shutdown (leftover tasks, async generators,
  the default executor) and, when the call fails, killing what it left and naming the threads it left.

So the call returns or fails within `seconds + 2 * grace`, as long as the body yields to the loop (a body blocking
the loop's thread outright is left to pytest-timeout). What the call started is told apart by what ran before it:
on the main thread, every child and thread of the process; on another thread (tests that run bodies side by side),
only the children that thread forks, and no threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

GRACE_S = 5.0  # how long a cancelled body (and then the loop's shutdown) may take to end


class BodyOverran(AssertionError):
    """A test body ran past its bound."""


def run_bounded(
    body: Awaitable[T] | Callable[[], Awaitable[T]],
    seconds: float,
    *,
    what: str | None = None,
    grace: float = GRACE_S,
) -> T:
    """Run `body` (an awaitable, or a function returning one, called on the new loop) in a fresh event loop,
    bounded by `seconds`; its result, or BodyOverran when it overran (see the module docstring)."""
    name = what or getattr(body, "__qualname__", None) or repr(body)
    tid = None if threading.current_thread() is threading.main_thread() else threading.get_native_id()
    children, threads = _children(os.getpid(), tid), set(threading.enumerate())
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # as asyncio.run does: code that asks for "the" loop (and child watchers) finds it
    task = loop.create_task(_within(body, seconds, name))
    finished = False
    try:
        finished = _settle(loop, task, seconds + grace)
    finally:
        after = time.monotonic() + grace
        try:
            left = _shut_down(loop, after)
        finally:
            asyncio.set_event_loop(None)
            loop.close()
    failure: BaseException | None
    if not finished:
        failure = BodyOverran(
            f"{name} ran past its bound of {seconds:g} s and did not end within {grace:g} s of the cancel"
        )
    else:
        failure = None if task.cancelled() else task.exception()
    if not isinstance(failure, BodyOverran) and not left:
        return task.result()  # the body's result, or its own exception
    left += _end_processes(_with_descendants(_children(os.getpid(), tid) - children), after)
    if tid is None:
        left += [f"thread {t.name!r} still running" for t in _new_threads(threads, after)]
    if isinstance(failure, BodyOverran):
        failure.args = ("; ".join([str(failure), *left]),)
        raise failure
    shutdown = f"{name} ended, but its loop did not shut down within {grace:g} s: " + "; ".join(left)
    if failure is None:
        raise BodyOverran(shutdown)
    failure.add_note(shutdown)  # the body's own failure first, the stuck shutdown noted on it
    return task.result()


async def _within(body: Awaitable[T] | Callable[[], Awaitable[T]], seconds: float, name: str) -> T:
    """Await the body under the bound; any outcome after the bound expired is an overrun."""
    bound = asyncio.timeout(seconds)
    try:
        async with bound:
            result = await (body() if callable(body) else body)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):  # GeneratorExit: an abandoned body being closed
        raise
    except BaseException as exc:
        if not bound.expired():
            raise
        if isinstance(exc, TimeoutError):  # the bound's own cancel, honoured
            raise BodyOverran(f"{name} ran past its bound of {seconds:g} s") from exc
        raise BodyOverran(f"{name} ran past its bound of {seconds:g} s, swallowed the cancel and raised late") from exc
    if bound.expired():
        raise BodyOverran(f"{name} ran past its bound of {seconds:g} s, swallowed the cancel and returned late")
    return result


def _settle(loop: asyncio.AbstractEventLoop, aw: Awaitable[Any], seconds: float) -> bool:
    """Run the loop until `aw` is done or `seconds` pass (then the loop is stopped); whether it got done. Its
    outcome stays on it for the caller (run_until_complete would raise it here)."""
    future = asyncio.ensure_future(aw, loop=loop)
    running = [True]

    def done(_: asyncio.Future[Any]) -> None:
        if running[0]:  # a call scheduled just as the time ran out must not stop a later run
            loop.stop()

    future.add_done_callback(done)
    stop = loop.call_later(seconds, loop.stop)
    try:
        loop.run_forever()
    finally:
        running[0] = False
        stop.cancel()
        future.remove_done_callback(done)
    return future.done()


def _shut_down(loop: asyncio.AbstractEventLoop, deadline: float) -> list[str]:
    """asyncio.run's shutdown with every step bounded: cancel what is left, end async generators, join the
    default executor's threads, all by `deadline` (time.monotonic). What did not end in time, as phrases for a
    failure message."""
    left: list[str] = []
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    if pending and not _settle(loop, asyncio.gather(*pending, return_exceptions=True), _left(deadline)):
        stuck = [t for t in pending if not t.done()]
        left.append("tasks that ignored their cancel: " + ", ".join(sorted(t.get_name() for t in stuck)))
        for t in stuck:  # abandoned: run their finally blocks now, while the loop is still open, and let them go
            with contextlib.suppress(RuntimeError):  # one that awaits while being closed
                t.get_coro().close()
            t._log_destroy_pending = False  # type: ignore[attr-defined]  # named in the failure already
    for t in pending:
        if t.done() and not t.cancelled() and t.exception() is not None:
            ctx = {"message": "unhandled exception during test body shutdown", "exception": t.exception(), "task": t}
            loop.call_exception_handler(ctx)
    if not _settle(loop, loop.shutdown_asyncgens(), _left(deadline)):
        left.append("async generators that did not close")
    if not _settle(loop, loop.shutdown_default_executor(), _left(deadline)):
        left.append("the default executor's threads still running")
    return left


def _children(pid: int, tid: int | None = None) -> set[int]:
    """The live children of process `pid`, or only those its thread `tid` forked (Linux /proc: each thread lists
    the children it started)."""
    found: set[int] = set()
    for kids in Path(f"/proc/{pid}/task").glob(f"{'*' if tid is None else tid}/children"):
        with contextlib.suppress(OSError):
            found.update(kid for kid in map(int, kids.read_text().split()) if _alive(kid))
    return found


def _with_descendants(pids: set[int]) -> set[int]:
    found, todo = set(pids), list(pids)
    while todo:
        for kid in _children(todo.pop()) - found:
            found.add(kid)
            todo.append(kid)
    return found


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie has ended: its owner reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _end_processes(pids: set[int], deadline: float) -> list[str]:
    """SIGKILL each process the body started and left running; wait (bounded) until each has ended."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return [f"killed process {pid} it left running" for pid in sorted(pids)]


def _new_threads(before: set[threading.Thread], deadline: float) -> list[threading.Thread]:
    """Threads started during the call still running after a join bounded by `deadline`."""
    new = [t for t in threading.enumerate() if t not in before]
    for t in new:
        t.join(_left(deadline))
    return [t for t in new if t.is_alive()]


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)
