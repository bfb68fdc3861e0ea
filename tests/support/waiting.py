"""Waiting for an event instead of sleeping for it: poll a condition until it holds or a deadline passes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 10.0
INTERVAL_S = 0.005


def until(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    """Return once predicate() holds; AssertionError naming `what` when it does not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(INTERVAL_S)


async def until_async(predicate: Callable[[], T], what: str, timeout: float = WAIT_S) -> T:
    """until() for a test on an event loop: the loop keeps running between the checks. Returns the first truthy
    value predicate() gave."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        await asyncio.sleep(INTERVAL_S)
