"""The sending side of A2A across the relay (docs/dev/relay.md "A2A across the relay"): `crosstalk send --a2a --as
AGENT NAME@ALIAS` hands the message, AGENT's bearer token and the task's parameters to this machine's relay process
(relay/local.py), which sends a task request (relay/a2a_wire.py) as AGENT; the receiving machine answers with the
task its agent NAME's task service made of it (relay/a2a_in.py). No NATS here: the CLI imports only this module."""

from __future__ import annotations

from crosstalk.core.message import Message
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.send import RemoteResult


def send_a2a_via_relay(
    paths: StatePaths, token: str, msg: Message, *, return_immediately: bool, task_id: str | None, timeout: float
) -> RemoteResult:
    """`msg` (to NAME@ALIAS) as a task of the agent whose bearer token is `token`, through this machine's relay
    process. Bounded by `timeout` plus the local socket's own."""
    import asyncio

    from crosstalk.relay.local import close_kept, send_via_local_relay

    task = {"return_immediately": return_immediately, "task_id": task_id}

    async def once() -> RemoteResult:
        try:
            return await send_via_local_relay(paths, token, msg, timeout=timeout, task=task)
        finally:
            await close_kept()  # one request from a one-off command: nothing to keep the connection for

    return asyncio.run(once())
