"""A harness whose inject adapter is not built yet (Claude, Codex until their harness issues land).

The agent registers and can send; every inbound delivery fails before anything is written, so the sender sees
`unreachable` with a reason that says why, instead of a fake success.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crosstalk.harness.base import (
    AgentInfo,
    BindResult,
    InjectRequest,
    InjectResult,
    PreSendFailure,
    SessionRow,
    render_envelope,
)


class UnavailableHarness:
    """Implements harness.base.Harness; inject always raises PreSendFailure (→ unreachable)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reason = f"the {name} adapter is not available yet"

    def identify(self, request: Mapping[str, Any]) -> str | None:
        return None  # the shim binds identity itself (crosstalk.shim.identity)

    async def bind(self, agent: AgentInfo) -> BindResult:
        return BindResult(inbound_reachable=False, reason=self.reason)

    def discover(self) -> list[SessionRow]:
        return []

    async def inject(self, request: InjectRequest) -> InjectResult:
        raise PreSendFailure(self.reason)

    def status(self) -> str:
        return "unknown"

    def render(self, request: InjectRequest) -> str:
        return render_envelope(request)

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        return None

    async def close(self) -> None:
        return None
