"""The Claude Code adapter: the agent's own shim writes into its own session's messaging socket.

The shim is a child of its Claude session, which hands it the session's socket and a child token
(`CLAUDE_CODE_MESSAGING_SOCKET`, `CLAUDE_CODE_MESSAGING_TOKEN`). A line written with the child token counts as
self-sent: it is never held, whatever the session's permission mode. One connection per message:

    {"type":"auth","token":<child token>}
    {"msgV":1,"msg_id":<message_id>,"type":"user","message":{"role":"user","content":<envelope>},
     "priority":"now|next|later","from":"uds:<our socket>"}
    then half-close, and wait for Claude to close its side.

What the pinned 2.1.332 does (docs/dev/claude-adapter.md has the experiment): it answers no bytes; after our
half-close it closes once it has read the lines (EOF). An idle session starts a turn with the message at any
priority; a busy one takes `next` at its next tool boundary (inside the running turn, the tool call intact),
`later` after the turn ends, and `now` interrupts the running tool call. So: auto → next, steer → now,
next_turn → later; meta joins a running turn (next) and is never sent to an idle session, which it would wake.

Outcomes: no socket or no connection → unreachable (nothing was written); EOF after our complete frame →
accepted; any bytes back, a reset, a broken write or no EOF in time → unknown (it may have landed; never resent).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping

from crosstalk.core.kinds import Delivery
from crosstalk.core.states import State
from crosstalk.harness.base import (
    AgentInfo,
    BindResult,
    HarnessDisconnected,
    InjectRequest,
    InjectResult,
    PreSendFailure,
    SessionIdentity,
    render_envelope,
)
from crosstalk.harness.claude.sessions import read_record, text_field

NAME = "claude"
SOCKET_ENV, TOKEN_ENV = "CLAUDE_CODE_MESSAGING_SOCKET", "CLAUDE_CODE_MESSAGING_TOKEN"
CONNECT_TIMEOUT_S = 2.0
WRITE_TIMEOUT_S = 5.0
EOF_TIMEOUT_S = 5.0
PRIORITY = {Delivery.AUTO: "next", Delivery.STEER: "now", Delivery.NEXT_TURN: "later"}


class ClaudeAdapter:
    """harness.base.HarnessAdapter for one Claude Code session, served by the shim that session started."""

    name = NAME

    def __init__(self, session: SessionIdentity, environ: Mapping[str, str]) -> None:
        self.session = session
        self._environ = dict(environ)
        self.socket_path: str | None = None
        self._token: str | None = None
        self.reason: str | None = None

    async def bind(self, agent: AgentInfo) -> BindResult:
        """The session's socket and the child token, from the shim's environment; the session's registry record
        must name the same socket (else this shim was not started by that session)."""
        path, token = self._environ.get(SOCKET_ENV), self._environ.get(TOKEN_ENV)
        record = read_record(self._environ, self.session.harness_pid or 0)
        version = text_field(record, "version") if record else None
        if not path or not token:
            self.reason = (
                f"this crosstalk mcp was not started by a Claude Code session ({SOCKET_ENV}/{TOKEN_ENV} unset), "
                "so it cannot write into one"
            )
        elif record is not None and text_field(record, "messagingSocketPath") not in (None, path):
            self.reason = "the session's registry record names another messaging socket than this shim inherited"
        else:
            self.socket_path, self._token = path, token
            return BindResult(endpoint=path, version=version)
        return BindResult(version=version, inbound_reachable=False, reason=self.reason)

    def status(self) -> str:
        record = read_record(self._environ, self.session.harness_pid or 0)
        status = text_field(record, "status") if record else None
        return status if status in ("idle", "busy") else "unknown"

    def render(self, request: InjectRequest) -> str:
        return render_envelope(request)

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        return agent.uds_path  # a native SendMessage to the envelope's `from` comes back to us: bounced

    async def inject(self, request: InjectRequest) -> InjectResult:
        if self.socket_path is None or self._token is None:
            raise PreSendFailure(self.reason or "not bound to a Claude Code session")
        if request.meta and self.status() != "busy":
            raise PreSendFailure("meta never starts a turn, and an idle Claude Code session takes input only as one")
        priority = "next" if request.meta else PRIORITY.get(request.delivery, "next")
        frame = [
            {"type": "auth", "token": self._token},
            {
                "msgV": 1,
                "msg_id": request.message.message_id,
                "type": "user",
                "message": {"role": "user", "content": self.render(request)},
                "priority": priority,
                **({"from": f"uds:{request.reply_address}"} if request.reply_address else {}),
            },
        ]
        payload = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in frame).encode()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(self.socket_path), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise PreSendFailure(f"the Claude Code session's socket {self.socket_path} refused: {exc}") from None
        try:
            return await self._send(reader, writer, payload, priority)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _send(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: bytes, priority: str
    ) -> InjectResult:
        try:
            writer.write(payload)
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
            writer.write_eof()
        except (OSError, TimeoutError) as exc:
            raise HarnessDisconnected(f"the write to the Claude Code session broke: {exc}") from None
        try:
            answer = await asyncio.wait_for(reader.read(4096), EOF_TIMEOUT_S)
        except TimeoutError:
            raise HarnessDisconnected(f"the Claude Code session did not close within {EOF_TIMEOUT_S:.0f} s") from None
        except OSError as exc:
            raise HarnessDisconnected(f"the Claude Code session's socket broke after the write: {exc}") from None
        if answer:
            raise HarnessDisconnected(f"the Claude Code session answered bytes: {answer[:80]!r}")
        return InjectResult(
            State.ACCEPTED, evidence={"claude": "eof_after_frame", "priority": priority, "socket": self.socket_path}
        )

    async def close(self) -> None:
        return None
