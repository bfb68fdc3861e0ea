"""What the bus-bridge tests share: the live agent alice's call context and the wait for what lands in an inbox."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from crosstalk.shim.router import CallContext
from tests.support.waiting import until_async

T = TypeVar("T")

WAIT_S = 60.0  # a reply crosses two dispatchers and a bare remote
ALICE = CallContext(meta={"crosstalk/session": "s-alice", "crosstalk/name": "alice"})


async def until(predicate: Callable[[], T], what: str, timeout: float = WAIT_S) -> T:
    """The first truthy value of predicate(), polled while the event loop runs."""
    return await until_async(predicate, what, timeout)
