"""The journal writer's batch bookkeeping (writer.py): a queued append, the ticket every append of one batch waits
on, and how the flusher settles the waiters, thread and event loop alike."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from crosstalk.journal.errors import JournalWriteError


@dataclass(slots=True)
class Pending:
    data: bytes
    durable: bool
    future: Future[int] | None = None  # only for submit(); append/append_async wait on the batch's ticket


@dataclass(slots=True)
class Ticket:
    """One per batch, shared by every append in it: the flusher wakes all sync waiters with one Event and each
    event loop with one call, instead of settling a future per record (that per-record cost, not fsync, was what
    capped group commit)."""

    event: threading.Event = field(default_factory=threading.Event)
    end: int = 0
    error: BaseException | None = None
    async_waiters: dict[asyncio.AbstractEventLoop, list[asyncio.Future[int]]] = field(default_factory=dict)


def settle(fut: Future[Any], *, result: Any = None, exc: BaseException | None = None) -> None:
    """Resolve a caller's future. A caller that gave up (cancelled its wait, e.g. a timeout or a cancelled
    handler) must not kill the flusher thread: that would wedge every later append of this journal."""
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
    except InvalidStateError:
        pass


def wake(ticket: Ticket, end: int, error: BaseException | None) -> None:
    ticket.end, ticket.error = end, error
    ticket.event.set()
    for loop, futures in ticket.async_waiters.items():
        try:
            loop.call_soon_threadsafe(settle_async, futures, end, error)
        except RuntimeError:
            pass  # that loop has closed: nobody is waiting any more


def settle_async(futures: list[asyncio.Future[int]], end: int, error: BaseException | None) -> None:
    for fut in futures:
        if fut.done():
            continue  # the caller gave up (timeout or cancellation)
        if error is not None:
            fut.set_exception(JournalWriteError(str(error)))
        else:
            fut.set_result(end)
