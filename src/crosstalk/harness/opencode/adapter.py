"""The OpenCode adapter: the shim OpenCode started (`crosstalk mcp --harness opencode`) hosts the agent of each of
its sessions and delivers through the plugin's inbox in that same OpenCode process (inbox.py). The plugin answers
only once OpenCode wrote the message into the session (its `chat.message` hook ran for it):

    immediate  the session was idle: a turn started with it          → accepted
    queued     busy: the running turn reads it at its next step       → queued
               (next_turn while busy: the plugin prompts it once the session is idle)
    noted      meta: written into the transcript without a turn       → queued
    error      nothing was written (no such session, promptAsync refused) → unreachable
    no answer, or the write not seen in time                           → unknown, never resent
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from crosstalk.core.states import State
from crosstalk.fs import trace
from crosstalk.harness import header
from crosstalk.harness.base import AgentInfo, BindResult, InjectRequest, InjectResult, SessionIdentity
from crosstalk.harness.errors import HarnessDisconnected, HarnessRefused, PreSendFailure
from crosstalk.harness.opencode import inbox

NAME = "opencode"
PID_ENV = "OPENCODE_PID"
ANSWER_TIMEOUT_S = 15.0  # the plugin waits up to 10 s to see the message written
HELLO_TIMEOUT_S = 5.0
REASONS = {
    "immediate": None,
    "queued": "the OpenCode session is busy: the running turn reads it at its next step",
    "next_turn": "the OpenCode session is busy: it starts a turn with it when this one ends",
    "noted": "meta: in the OpenCode session's transcript, no turn started",
}
STATES = {"immediate": State.ACCEPTED, "queued": State.QUEUED, "noted": State.QUEUED}


def as_of(request: InjectRequest) -> str:
    from crosstalk.core.kinds import Delivery, Kind

    if request.meta or request.message.kind is Kind.META:
        return "meta"
    return "next_turn" if request.delivery is Delivery.NEXT_TURN else request.delivery.value


class OpenCodeAdapter:
    """harness.base.HarnessAdapter for one OpenCode session, served by the shim its OpenCode process started."""

    name = NAME

    def __init__(self, session: SessionIdentity, environ: Mapping[str, str]) -> None:
        self.session = session
        self._environ = dict(environ)
        self.socket_path = inbox.socket_path(environ, session.harness_pid or 0)
        self.reason: str | None = None

    async def bind(self, agent: AgentInfo) -> BindResult:
        """The plugin's inbox of the shim's own OpenCode process must answer, from that process."""
        pid = self.session.harness_pid or 0
        try:
            hello = await asyncio.to_thread(inbox.request, self.socket_path, {"op": "hello"}, HELLO_TIMEOUT_S)
        except (PreSendFailure, HarnessDisconnected) as exc:
            self.reason = f"{exc}: is crosstalk's OpenCode plugin installed (`crosstalk install opencode`)?"
            return BindResult(inbound_reachable=False, reason=self.reason)
        if hello.get("pid") != pid:
            self.reason = f"the inbox {self.socket_path} answers for process {hello.get('pid')}, not OpenCode {pid}"
            return BindResult(inbound_reachable=False, reason=self.reason)
        self.reason = None
        return BindResult(endpoint=str(self.socket_path), version=f"plugin {hello.get('version')}")

    def status(self) -> str:
        return "unknown"  # the plugin says idle or busy per delivery

    def render(self, request: InjectRequest) -> str:
        return header.render(request)

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        return None

    async def inject(self, request: InjectRequest) -> InjectResult:
        if self.reason is not None:
            raise PreSendFailure(self.reason)
        as_ = as_of(request)
        ask = {"op": "deliver", "session": self.session.session_ref, "text": self.render(request), "as": as_}
        trace.mark("harness_write", harness=NAME)
        # PreSendFailure (nothing written) and HarnessDisconnected (no answer) go to the chain as they are
        answer = await asyncio.to_thread(inbox.request, self.socket_path, ask, ANSWER_TIMEOUT_S)
        if answer.get("error"):
            raise HarnessRefused(f"the OpenCode plugin did not write it: {str(answer['error'])[:200]}")
        delivered = answer.get("delivered")
        state = STATES.get(str(delivered))
        if state is None:
            raise HarnessDisconnected(f"the OpenCode plugin could not say it was written: {str(answer)[:160]}")
        key = "next_turn" if answer.get("held") == "next_turn" else str(delivered)
        evidence = {"opencode": delivered, "status": answer.get("status")}
        return InjectResult(state, REASONS.get(key), evidence)

    async def close(self) -> None:
        return None
