"""The Gemini CLI adapter: the agent's own shim queues each message for its session, and crosstalk's hook hands it
to the model at the session's next hook point (harness/gemini/hook.py, docs/dev/gemini-adapter.md).

Gemini CLI 0.61.0 has no way in for a program outside the session: no socket, no inbox, and nothing starts a turn in
an idle interactive session. What it has is hooks: `AfterTool` `additionalContext` rides the tool's result into the
running turn, `BeforeAgent` `additionalContext` is appended to the user's next prompt. So:

- `inject` queues the message and answers `queued`, with a reason that says when the model will see it: in a turn,
  after the running tool call returns; idle, with the user's next prompt. Never `accepted`: nothing reached the
  model yet.
- The hook asks this adapter's socket (`<run dir>/<gemini pid>.sock`) at each of those points, takes everything
  queued, in order, writes it to Gemini and says so: then each message settles `accepted` through the late-outcome
  path (harness.base.SettlesLater, `settles_queued`). A hook that took messages and ended without saying it handed
  them over settles them `unknown` (maybe seen, never resent). Messages still queued when the shim stops never
  reached the model: `unreachable`.

Only a process of this user whose ancestry reaches this session's Gemini process may connect, and it must name
the session this agent serves (a `/clear` starts another).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import struct
from collections.abc import Mapping

from crosstalk.core.kinds import Kind
from crosstalk.core.states import State
from crosstalk.harness.base import (
    AgentInfo,
    BindResult,
    InjectRequest,
    InjectResult,
    LateSink,
    SessionIdentity,
    render_envelope,
)
from crosstalk.harness.errors import PreSendFailure
from crosstalk.harness.gemini.sessions import parent_of, read_record, run_dir, socket_path, status_of

NAME = "gemini"
READ_TIMEOUT_S = 5.0
MAX_LINE = 64 * 1024
BUSY_REASON = (
    "queued: the Gemini CLI session is in a turn; its model sees it when the running tool call returns (crosstalk's "
    "AfterTool hook), or with the user's next prompt if the turn ends without another tool call"
)
IDLE_REASON = (
    "queued: the Gemini CLI session is idle; its model sees it with the user's next prompt (crosstalk's BeforeAgent "
    "hook). Nothing can start a turn in an idle Gemini CLI session"
)
SETTLES = "crosstalk tells the sender when the hook hands it to the model"
WHERE = {
    "AfterTool": "with a tool result, in the running turn",
    "BeforeAgent": "with the user's prompt, at the start of a turn",
}


def _peer_pid(writer: asyncio.StreamWriter) -> tuple[int, int]:
    sock = writer.get_extra_info("socket")
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def _descends(pid: int, ancestor: int) -> bool:
    for _ in range(8):
        pid = parent_of(pid)
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


class GeminiAdapter:
    """harness.base.HarnessAdapter for one Gemini CLI session, served by the shim that session started."""

    name = NAME
    settles_queued = True  # a queued message's hand-over comes later (receiver chain: settle_late)

    def __init__(self, session: SessionIdentity, environ: Mapping[str, str]) -> None:
        self.session = session
        self._environ = dict(environ)
        self.path: str | None = None
        self.reason: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._queue: list[tuple[str, str]] = []  # (message_id, text), oldest first
        self._status = "unknown"
        self._sink: LateSink | None = None

    def on_settled(self, sink: LateSink) -> None:
        self._sink = sink

    def _settle(self, message_id: str, result: InjectResult) -> None:
        if self._sink is not None:
            self._sink(message_id, result)

    async def bind(self, agent: AgentInfo) -> BindResult:
        pid = self.session.harness_pid or 0
        directory = run_dir(self._environ, create=True)
        if directory is None:
            self.reason = "no private directory for crosstalk's Gemini sockets (/tmp/crosstalk-gemini-<uid>)"
        elif (record := read_record(self._environ, pid)) is None:
            self.reason = "no live Gemini CLI session record for this shim's parent (is crosstalk's hook installed?)"
        else:
            self._status = status_of(record)
            path = socket_path(directory, pid)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a socket the session's previous shim left (one shim per Gemini process)
            self._server = await asyncio.start_unix_server(self._serve, path=str(path))
            os.chmod(path, 0o600)
            self.path = str(path)
            return BindResult(endpoint=self.path)
        return BindResult(inbound_reachable=False, reason=self.reason)

    def status(self) -> str:
        return self._status

    def render(self, request: InjectRequest) -> str:
        text = render_envelope(request)
        if request.message.kind is Kind.ASK:
            text += f"\n(answer with the crosstalk reply tool, message_id {request.message.message_id})"
        return text

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        return None

    async def inject(self, request: InjectRequest) -> InjectResult:
        if self.path is None:
            raise PreSendFailure(self.reason or "not bound to a Gemini CLI session")
        record = read_record(self._environ, self.session.harness_pid or 0)
        if record is None:
            raise PreSendFailure("the Gemini CLI session ended (its process is gone)")
        if record["sessionId"] != self.session.session_ref:
            raise PreSendFailure("the Gemini CLI process now runs another session (/clear or /resume)")
        self._queue.append((request.message.message_id, self.render(request)))
        reason = BUSY_REASON if self._status == "busy" else IDLE_REASON
        evidence = {"gemini": "hook-queue", "session": self._status, "settles": SETTLES}
        return InjectResult(State.QUEUED, reason, evidence)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        taken: list[str] = []
        event = ""
        try:
            pid, uid = _peer_pid(writer)
            if uid != os.geteuid() or not _descends(pid, self.session.harness_pid or 0):
                return
            ask = json.loads(await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S) or b"{}")
            event = str(ask.get("event") or "") if isinstance(ask, dict) else ""
            if not isinstance(ask, dict) or ask.get("sessionId") != self.session.session_ref:
                writer.write(b"{}\n")
                return
            self._status = "idle" if event == "AfterAgent" else "busy"
            if event not in WHERE or not self._queue:
                writer.write(b"{}\n")
                return
            batch, self._queue = self._queue, []
            taken = [mid for mid, _ in batch]
            answer = {"ids": taken, "context": "\n\n".join(text for _, text in batch)}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
            said = json.loads(await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S) or b"{}")
            handed = said.get("handed") if isinstance(said, dict) else None
            if isinstance(handed, list) and handed == taken:
                for mid in taken:
                    self._settle(mid, InjectResult(State.ACCEPTED, f"handed to the Gemini model {WHERE[event]} "
                                                   f"({event} hook)", {"gemini": event}))  # fmt: skip
                taken = []
        except (OSError, ValueError, TimeoutError):
            pass
        finally:
            for mid in taken:  # taken by the hook, which never said it handed them over
                why = "crosstalk's Gemini hook took it and ended without saying it handed it over; never resent"
                self._settle(mid, InjectResult(State.UNKNOWN, why, {"gemini": event}))
            with contextlib.suppress(OSError):
                writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        left, self._queue = self._queue, []
        for mid, _ in left:
            self._settle(mid, InjectResult(State.UNREACHABLE, "the Gemini CLI session's crosstalk stopped before "
                                           "its model saw it", {"gemini": "closed"}))  # fmt: skip
