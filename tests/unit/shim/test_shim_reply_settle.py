"""A reply that races its own message's delivery: the session sees the message as soon as the harness write lands,
before the receiver journals its outcome. The reply tool waits (bounded) for that outcome instead of refusing the
reply as no_such_message (seen in a loaded CI run: a fake session replied within the window)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from crosstalk.core.states import State
from crosstalk.shim import replying
from tests.support.bounded import run_bounded


def host_with(state: State) -> SimpleNamespace:
    entry = SimpleNamespace(state=state)
    return SimpleNamespace(state=SimpleNamespace(messages={"m1": entry}), entry=entry)


def test_a_reply_waits_for_the_delivery_outcome_of_a_message_still_dispatching() -> None:
    host = host_with(State.DISPATCHING)

    async def main() -> None:
        async def deliver() -> None:
            await asyncio.sleep(0.2)  # the harness answers late: the wait under test must outlast it
            host.entry.state = State.ACCEPTED

        task = asyncio.create_task(deliver())
        # Bounded far past the delivery: a wait that ignored the outcome would run into wait_for's 5 s.
        await asyncio.wait_for(replying.delivery_settled(host, "m1", timeout=3600), 5)  # type: ignore[arg-type]
        assert host.entry.state is State.ACCEPTED  # returned after the outcome, not before
        await task

    asyncio.run(main())


def test_a_settled_or_unknown_message_is_not_waited_for() -> None:
    for state in (State.ACCEPTED, State.QUEUED, State.UNKNOWN, State.REJECTED):
        host = host_with(state)
        run_bounded(replying.delivery_settled(host, "m1", timeout=3600), 5)  # type: ignore[arg-type]
        run_bounded(replying.delivery_settled(host, "nope", timeout=3600), 5)  # type: ignore[arg-type]


def test_a_delivery_that_never_settles_is_waited_for_only_until_the_bound() -> None:
    host = host_with(State.DISPATCHING)
    run_bounded(replying.delivery_settled(host, "m1", timeout=0.1), 5)  # type: ignore[arg-type]
    assert host.entry.state is State.DISPATCHING
