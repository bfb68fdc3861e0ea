"""The pi adapter: a message goes to the extension's delivery queue over the pi link, and the extension's answer is
the outcome, one per delivery mode the extension reports: `immediate` (a new turn) → accepted; `queued` (a steer
or follow-up, or waiting its turn in the queue) → queued; `noted` (meta: in the transcript, no turn) → queued.

No link (the agent is not hosted by the extension's core) → unreachable, nothing sent. The link closed before the
message was written → unreachable; after, or no answer in time → unknown, never resent.
"""

from __future__ import annotations

from crosstalk.core.kinds import PI_MODES, Kind
from crosstalk.core.states import State
from crosstalk.harness.base import AgentInfo, BindResult, InjectRequest, InjectResult
from crosstalk.harness.errors import HarnessDisconnected, HarnessRefused, LinkClosed, PreSendFailure
from crosstalk.harness.pi.link import PiLink
from crosstalk.harness.pi.render import render

NAME = "pi"
ANSWER_TIMEOUT_S = 10.0
DELIVERED = {"immediate": State.ACCEPTED, "queued": State.QUEUED, "noted": State.QUEUED}
NO_LINK = "pi sessions receive through the crosstalk pi extension (run `crosstalk install pi`, then `/crosstalk`)"


class PiAdapter:
    """harness.base.HarnessAdapter for one pi session, over its extension's link (None: not hosted by one)."""

    name = NAME

    def __init__(self, link: PiLink | None) -> None:
        self.link = link

    async def bind(self, agent: AgentInfo) -> BindResult:
        if self.link is None:
            return BindResult(inbound_reachable=False, reason=NO_LINK)
        return BindResult(endpoint="pi-extension")

    def status(self) -> str:
        return "unknown"  # the extension's queue knows; it answers per delivery

    def render(self, request: InjectRequest) -> str:
        return render(request)

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        return None

    async def inject(self, request: InjectRequest) -> InjectResult:
        if self.link is None:
            raise PreSendFailure(NO_LINK)
        as_ = "meta" if request.meta or request.message.kind is Kind.META else PI_MODES[request.delivery]
        text = self.render(request)
        if self.link.closed.is_set():
            raise PreSendFailure("the pi extension closed the link")
        try:
            answer = await self.link.deliver(text, as_, ANSWER_TIMEOUT_S)
        except LinkClosed as exc:
            raise HarnessDisconnected(str(exc)) from None
        except TimeoutError:
            raise HarnessDisconnected("the pi extension did not answer the delivery") from None
        error = answer.get("error")
        if error:
            raise HarnessRefused(f"the pi extension refused: {str(error)[:200]}")
        state = DELIVERED.get(str(answer.get("delivered")))
        if state is None:
            raise HarnessDisconnected(f"the pi extension answered {str(answer)[:120]}")
        return InjectResult(state, evidence={"pi": answer["delivered"]})

    async def close(self) -> None:
        return None
