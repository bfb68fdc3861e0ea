"""The Qwen Code adapter: the agent's own shim writes into its own session's inbox.

The shim is an MCP child of its Qwen TUI, which hands it the inbox and the session's child token
(`QWEN_CODE_MESSAGING_SOCKET`, `QWEN_CODE_MESSAGING_TOKEN`). Qwen takes a frame presenting that token as from "a
process that session started": delivered under the default policy whatever the session's approval mode
(`origin="own-process"`), unless the user's `agents.crossSessionInbound` says `hold` or `refuse`. The frame names
our receipt inbox (harness/qwen/receipts.py), so every outcome is known: the first receipt is the answer, and a held
message's final word goes to the chain's sink (harness.base.SettlesLater). The frame's `toSessionId` is the
session's id read from its registry record just before the write (`/clear` and `/resume` swap it).

What the pinned 0.24.4 does (docs/dev/qwen-adapter.md): an idle session starts a turn with the message ~0.1 s after
the write; a busy one answers `delivered` at once but starts a new turn with it only after the running turn ends
(`priority: "now"` changes nothing). So `delivered` is `queued`, and the reason says when the model sees it. meta
would start a turn (there is no other way in): it is refused before anything is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from crosstalk.core.states import State
from crosstalk.harness import header
from crosstalk.harness.base import (
    AgentInfo,
    BindResult,
    InjectRequest,
    InjectResult,
    LateSink,
    SessionIdentity,
)
from crosstalk.harness.errors import HarnessDisconnected, HarnessRefused, PreSendFailure, ReceiverRefused
from crosstalk.harness.qwen import receipts, wire
from crosstalk.harness.qwen.sessions import read_record, text_field

NAME = "qwen"
SOCKET_ENV, TOKEN_ENV = "QWEN_CODE_MESSAGING_SOCKET", "QWEN_CODE_MESSAGING_TOKEN"


class QwenAdapter:
    """harness.base.HarnessAdapter for one Qwen Code session, served by the shim that session started."""

    name = NAME

    def __init__(self, session: SessionIdentity, environ: Mapping[str, str]) -> None:
        self.session = session
        self._environ = dict(environ)
        self.socket_path: str | None = None
        self._token: str | None = None
        self.reason: str | None = None
        self._sink: LateSink | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def on_settled(self, sink: LateSink) -> None:
        self._sink = sink

    def _later(self, message_id: str, receipt: receipts.Receipt) -> None:
        """A later receipt (on the inbox's reader thread), handed to the event loop, to the chain's sink."""
        loop, sink = self._loop, self._sink
        if loop is not None and sink is not None and not loop.is_closed():
            loop.call_soon_threadsafe(sink, message_id, receipts.late_result(receipt))

    async def bind(self, agent: AgentInfo) -> BindResult:
        """The inbox and the child token from the shim's environment; the session's record must name that inbox."""
        path, token = self._environ.get(SOCKET_ENV), self._environ.get(TOKEN_ENV)
        record = read_record(self._environ, self.session.harness_pid or 0)
        version = text_field(record, "qwenVersion")
        if not path or not token:
            self.reason = (f"this crosstalk mcp was not started by a Qwen Code session ({SOCKET_ENV}/{TOKEN_ENV} "
                           "unset; only the interactive TUI sets them), so it cannot write into one")  # fmt: skip
        elif record is None:
            self.reason = "the Qwen Code session's registry record is gone"
        elif text_field(record, "ipcPath") != path:
            self.reason = "the session's registry record names another inbox than this shim inherited"
        else:
            self.socket_path, self._token = path, token
            return BindResult(endpoint=path, version=version)
        return BindResult(version=version, inbound_reachable=False, reason=self.reason)

    def status(self) -> str:
        return "unknown"  # the record says nothing of it

    def render(self, request: InjectRequest) -> str:
        return header.render(request)

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        return None  # Qwen's own envelope names the frame's `from` (our receipt inbox); crosstalk's names none

    async def inject(self, request: InjectRequest) -> InjectResult:
        if self.socket_path is None or self._token is None:
            raise PreSendFailure(self.reason or "not bound to a Qwen Code session")
        if request.meta:
            raise PreSendFailure("meta never starts a turn, and a Qwen Code session takes a message only as a turn")
        pid = self.session.harness_pid or 0
        record = read_record(self._environ, pid)
        if record is None:
            raise PreSendFailure("the Qwen Code session ended (its registry record is gone)")
        mid = request.message.message_id
        self._loop = asyncio.get_running_loop()
        result = await asyncio.to_thread(
            wire.deliver, self.socket_path, pid, self._token, to_session=str(record["sessionId"]),
            content=self.render(request), from_name=request.sender.label, from_mode=None, message_id=mid,
            on_receipt=lambda r: self._later(mid, r), environ=self._environ,
        )  # fmt: skip
        if result.state is State.REJECTED:
            raise ReceiverRefused(result.reason or "the Qwen Code session refused it")
        if result.state is State.UNREACHABLE:
            raise HarnessRefused(result.reason or "the Qwen Code session did not take it")
        if result.state is State.UNKNOWN:
            raise HarnessDisconnected(result.reason or "the Qwen Code session did not say what it did")
        return result

    async def close(self) -> None:
        return None
