"""The Claude Code adapter: the agent's own shim writes into its own session's messaging socket.

The shim is a child of its Claude session, which hands it the session's socket and a child token
(`CLAUDE_CODE_MESSAGING_SOCKET`, `CLAUDE_CODE_MESSAGING_TOKEN`). Claude counts a frame from its own descendant as
self-sent: delivered at once, whatever the session's permission mode, unless the user's `crossSessionInbound` says
`hold` (held for the user, its own children too) or `refuse` (refused). One connection per message:

    {"type":"auth","token":<child token>}
    {"msgV":1,"msg_id":<message_id>,"type":"user","message":{"role":"user","content":<envelope>},
     "priority":"now|next|later","from":"uds:<this process's receipt inbox>"}
    then half-close, and wait for Claude to close its side.

What the pinned 2.1.332 does (docs/dev/claude-adapter.md has the experiments): it answers no bytes; after our
half-close it closes once it has read the lines (EOF), and a message it did not deliver at once is answered by a
receipt to the frame's `from` (harness/claude/receipts.py): `held` or refused as it closes, and later what the user
decided (delivered, denied, expired). An idle session starts a turn with the message at any priority; a busy one
takes `next` at its next tool boundary, `later` after the turn ends, and `now` interrupts the running tool call.
So: auto → next, steer → now, next_turn → later; meta joins a running turn (next) and is never sent to an idle
session, which it would wake. The envelope's `from` stays the agent's own socket: a native reply comes back to us.

Outcomes: the user's setting reads `refuse` → rejected, nothing written; no socket or no connection → unreachable;
a `held` receipt → held, settled later through the chain's sink; a refused receipt → rejected; EOF with no receipt
→ accepted; any bytes back, a reset, a broken write or no EOF in time → unknown (it may have landed; never resent).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Mapping

from crosstalk.core.kinds import Delivery
from crosstalk.core.states import State
from crosstalk.fs import trace
from crosstalk.harness.base import (
    AgentInfo,
    BindResult,
    InjectRequest,
    InjectResult,
    LateSink,
    SessionIdentity,
    render_envelope,
)
from crosstalk.harness.claude import receipts
from crosstalk.harness.claude.inbound import REFUSE_REASON, inbound_setting
from crosstalk.harness.claude.sessions import read_record, text_field
from crosstalk.harness.errors import HarnessDisconnected, HarnessRefused, PreSendFailure, ReceiverRefused

NAME = "claude"
SOCKET_ENV, TOKEN_ENV = "CLAUDE_CODE_MESSAGING_SOCKET", "CLAUDE_CODE_MESSAGING_TOKEN"
CONNECT_TIMEOUT_S = 2.0
WRITE_TIMEOUT_S = 5.0
EOF_TIMEOUT_S = 5.0
PRIORITY = {Delivery.AUTO: "next", Delivery.STEER: "now", Delivery.NEXT_TURN: "later"}
NO_INBOX = "without one, Claude would not say whether it delivered or held a message"
HOLD_RECEIPT_S = 2.0  # with the user's setting at `hold`, how long the held receipt may take after the EOF
# Otherwise Claude delivers its own child's frame at once (no receipt), unless a setting crosstalk cannot read holds
# or refuses it: that receipt comes within ~1 ms of the EOF (measured), so a short grace catches it; a later one
# still moves the message (the chain journals the contradiction and the sender is told).
RECEIPT_GRACE_S = 0.01


class ClaudeAdapter:
    """harness.base.HarnessAdapter for one Claude Code session, served by the shim that session started."""

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
        """harness.base.SettlesLater: Claude's later receipts on held messages go to the chain's sink."""
        self._sink = sink

    def _receipt(self, message_id: str, receipt: receipts.Receipt) -> None:
        """A receipt (on the inbox's reader thread): handed to the event loop, to the chain's sink."""
        loop, sink = self._loop, self._sink
        if loop is not None and sink is not None and not loop.is_closed():
            result = receipts.result_of(receipt)
            loop.call_soon_threadsafe(sink, message_id, result)

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
        pid = self.session.harness_pid or 0
        record = read_record(self._environ, pid)
        setting = inbound_setting(pid, text_field(record, "cwd") if record else None, self._environ)
        if setting == "refuse":
            raise ReceiverRefused(REFUSE_REASON)
        if request.meta and (text_field(record, "status") if record else None) != "busy":
            raise PreSendFailure("meta never starts a turn, and an idle Claude Code session takes input only as one")
        mid = request.message.message_id
        inbox = receipts.inbox_for(self.socket_path)
        address = inbox.address if inbox else None
        if inbox is None or address is None:
            raise PreSendFailure(f"no reply socket Claude accepts could be bound beside {self.socket_path}: {NO_INBOX}")
        self._loop = loop = asyncio.get_running_loop()
        heard: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not heard.done():
                heard.set_result(None)

        def on_receipt(receipt: receipts.Receipt) -> None:  # on the inbox's reader thread, the receipt recorded
            self._receipt(mid, receipt)
            if not loop.is_closed():
                loop.call_soon_threadsafe(wake)

        inbox.expect(mid, pid, on_receipt)
        priority = "next" if request.meta else PRIORITY.get(request.delivery, "next")
        frame = [
            {"type": "auth", "token": self._token},
            {
                "msgV": 1,
                "msg_id": mid,
                "type": "user",
                "message": {"role": "user", "content": self.render(request)},
                "priority": priority,
                "from": address,
            },
        ]
        payload = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in frame).encode()
        # A bare non-blocking socket, not asyncio streams: the frame is one short write and the answer one read, and
        # a transport with its protocol and reader per message cost ~0.13 ms before the write (bench/own_part.py).
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.setblocking(False)
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await loop.sock_connect(sock, self.socket_path)
            except (OSError, TimeoutError) as exc:
                inbox.forget(mid)
                raise PreSendFailure(f"the Claude Code session's socket {self.socket_path} refused: {exc}") from None
            await self._send(sock, payload)
        finally:
            sock.close()
        # Claude sends a held or refused receipt as it closes our connection, none for a message it delivered. A
        # frame from its own child is held only when the user's setting says so: wait for the receipt then.
        # Waited for on the event loop (the inbox's callback wakes it), not on a worker thread per message.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(HOLD_RECEIPT_S if setting == "hold" else RECEIPT_GRACE_S):
                await heard
        receipt = inbox.wait(mid, 0)  # the first receipt read by now, if any; it never blocks
        evidence = {"priority": priority, "socket": self.socket_path, "setting": setting}
        if receipt is None:
            return InjectResult(State.ACCEPTED, evidence={"claude": "eof_no_receipt", **evidence})
        result = receipts.result_of(receipt)
        if result.state is State.REJECTED:
            raise ReceiverRefused(result.reason or REFUSE_REASON)
        if result.state in (State.UNREACHABLE, State.UNKNOWN):
            raise HarnessRefused(result.reason or "the Claude Code session did not take it")
        return InjectResult(result.state, result.reason, {**result.evidence, **evidence})

    async def _send(self, sock: socket.socket, payload: bytes) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await loop.sock_sendall(sock, payload)
            sock.shutdown(socket.SHUT_WR)
            trace.mark("harness_write", harness=NAME)
        except (OSError, TimeoutError) as exc:
            raise HarnessDisconnected(f"the write to the Claude Code session broke: {exc}") from None
        try:
            async with asyncio.timeout(EOF_TIMEOUT_S):
                answer = await loop.sock_recv(sock, 4096)
        except TimeoutError:
            raise HarnessDisconnected(f"the Claude Code session did not close within {EOF_TIMEOUT_S:.0f} s") from None
        except OSError as exc:
            raise HarnessDisconnected(f"the Claude Code session's socket broke after the write: {exc}") from None
        if answer:
            raise HarnessDisconnected(f"the Claude Code session answered bytes: {answer[:80]!r}")

    async def close(self) -> None:
        return None
