"""An agent's A2A endpoint, as AgentHost starts it: the port bound at once, the SDK loaded on the first client
(ingress/a2a/lazy.py). crosstalk's own agents reach it through its socket's task frames (ingress/uds_tasks.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crosstalk.core.sender import Sender, SenderClass
from crosstalk.ingress.a2a.lazy import LazyA2AServer
from crosstalk.registry.bearer import BearerDirectory

if TYPE_CHECKING:
    from crosstalk.core.tasks import TaskApi
    from crosstalk.ingress.uds_tasks import OpHandler


def a2a_endpoint(
    name: str, harness: str, tasks: TaskApi, bearer: BearerDirectory, ops: OpHandler | None
) -> LazyA2AServer:
    """Agent `name`'s A2A server, not started: bearer tokens name the sender (EdgeGate), claims go to `ops`."""

    def authenticate(token: str) -> Sender | None:
        desc = bearer.lookup(token)
        return Sender(SenderClass.VERIFIED, desc.agent_id, desc.name, "a2a") if desc else None

    return LazyA2AServer(
        name=name,
        description=f"crosstalk agent {name} ({harness} session): messages sent here arrive inside the live session.",
        tasks=tasks,
        authenticate=authenticate,
        to=name,
        ops=ops,
    )
