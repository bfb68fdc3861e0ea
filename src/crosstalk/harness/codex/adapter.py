"""The Codex adapter: a Codex thread's agent delivers into the thread through the app-server that has it loaded.

bind: every endpoint the thread may be on (endpoints.py: the control socket under CODEX_HOME, the shim's own
app-server's socket, the endpoints other Codex agents' descriptors record) is asked `thread/loaded/list`. Exactly
one has the thread → bound to it; several → `ambiguous_endpoint`, never the first; none (`codex exec`, a TUI
without a control socket) → sending works, inbound is unreachable with that reason.

inject, by delivery (HARNESSES.md): auto → `turn/start` (a running turn takes it as a steer; an idle thread starts
a turn); steer → `turn/steer` with the running turn's id (`turn/start` when the thread is idle, or when the turn
ended before the steer landed: a refused steer wrote nothing); next_turn and meta → `thread/inject_items`
(model-visible history, no turn: `queued`). A
sender that is not verified never starts a turn: its message is appended. Outcomes: no connection → unreachable
(nothing sent); a JSON-RPC error → unreachable (a definite refusal); a turn id → accepted; inject_items success →
queued; a connection that broke or a request unanswered after it was sent → unknown, never resent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from crosstalk.core.kinds import Delivery
from crosstalk.core.sender import SenderClass
from crosstalk.core.states import State
from crosstalk.harness.base import AgentInfo, BindResult, InjectRequest, InjectResult, SessionIdentity, render_envelope
from crosstalk.harness.codex.appserver import AppServer, loaded_threads
from crosstalk.harness.codex.endpoints import endpoints
from crosstalk.harness.errors import AppServerError, AppServerGone, HarnessDisconnected, HarnessRefused, PreSendFailure

NAME = "codex"
BIND_DEADLINE_S = 10.0  # asking every endpoint whether it has the thread loaded
CALL_DEADLINE_S = 30.0  # one delivery: up to four requests (thread/read, thread/turns/list, turn/steer, turn/start)


class CodexAdapter:
    """harness.base.HarnessAdapter for one Codex thread."""

    name = NAME

    def __init__(self, session: SessionIdentity, environ: Mapping[str, str]) -> None:
        self.thread_id = session.session_ref
        self._environ = dict(environ)
        self.endpoint: str | None = None
        self.reason: str | None = None
        self._server: AppServer | None = None

    async def bind(self, agent: AgentInfo) -> BindResult:
        holding: list[tuple[str, AppServer]] = []
        problems: list[str] = []
        try:
            async with asyncio.timeout(BIND_DEADLINE_S):  # every endpoint together, whatever each one does
                for path in endpoints(self._environ, agent.known_endpoints):
                    await self._ask(path, holding, problems)
        except TimeoutError:
            problems.append(f"the Codex app-servers did not all answer within {BIND_DEADLINE_S:.0f} s")
        if len(holding) == 1:
            self.endpoint, self._server = holding[0]
            return BindResult(endpoint=self.endpoint)
        for _, server in holding:
            await server.close()
        if holding:
            where = ", ".join(path for path, _ in holding)
            self.reason = f"ambiguous_endpoint: the thread is loaded on several Codex app-servers ({where})"
        else:
            self.reason = "no Codex app-server has this thread loaded (" + "; ".join(problems) + ")"
            self.reason += "; `codex exec` takes no input"
        return BindResult(inbound_reachable=False, reason=self.reason)

    async def _ask(self, path: str, holding: list[tuple[str, AppServer]], problems: list[str]) -> None:
        """Whether the app-server at `path` has this thread loaded: its connection is kept in `holding` if so."""
        try:
            server = await AppServer.connect(path)
        except (AppServerGone, AppServerError) as exc:
            problems.append(str(exc))
            return
        kept = False
        try:
            try:
                loaded = await loaded_threads(server)
            except (AppServerGone, AppServerError) as exc:
                problems.append(f"the Codex app-server at {path} did not list its threads: {exc}")
                loaded = []
            if self.thread_id in loaded:
                holding.append((path, server))
                kept = True
            else:
                problems.append(f"the Codex app-server at {path} does not have this thread loaded")
        finally:
            if not kept:
                await server.close()

    def status(self) -> str:
        return "unknown"  # asked per delivery, never guessed

    def render(self, request: InjectRequest) -> str:
        return render_envelope(request)

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        return None  # a Codex thread has no native reply path to us

    async def inject(self, request: InjectRequest) -> InjectResult:
        if self.endpoint is None:
            raise PreSendFailure(self.reason or "not bound to a Codex app-server")
        try:
            async with asyncio.timeout(CALL_DEADLINE_S):  # every request of this delivery together
                return await self._inject(request)
        except TimeoutError:
            # Something may have been written: the outcome is unknown, and the message is never resent.
            raise HarnessDisconnected(f"the Codex app-server did not finish within {CALL_DEADLINE_S:.0f} s") from None

    async def _inject(self, request: InjectRequest) -> InjectResult:
        text = self.render(request)
        append = (
            request.meta
            or request.delivery is Delivery.NEXT_TURN
            or request.sender.sender_class is not SenderClass.VERIFIED
        )
        if append:
            items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]
            await self._call("thread/inject_items", {"threadId": self.thread_id, "items": items})
            return InjectResult(State.QUEUED, evidence={"codex": "inject_items", "endpoint": self.endpoint})
        params = {"threadId": self.thread_id, "input": [{"type": "text", "text": text, "text_elements": []}]}
        if request.delivery is Delivery.STEER:
            steered = await self._steer(params)
            if steered is not None:
                return steered
        result = await self._call("turn/start", params)
        turn = result.get("turn") if isinstance(result, dict) else None
        turn_id = turn.get("id") if isinstance(turn, dict) else None
        if not isinstance(turn_id, str):
            raise HarnessDisconnected(f"turn/start answered no turn id: {str(result)[:120]}")
        return InjectResult(State.ACCEPTED, evidence={"codex": "turn/start", "turn_id": turn_id})

    async def _steer(self, params: dict[str, Any]) -> InjectResult | None:
        """turn/steer into the running turn; None when there is none (then a turn is started)."""
        read = await self._call("thread/read", {"threadId": self.thread_id})
        status = ((read or {}).get("thread") or {}).get("status") or {}
        if status.get("type") != "active":
            return None
        turns = await self._call("thread/turns/list", {"threadId": self.thread_id})
        running = [t.get("id") for t in (turns or {}).get("data") or [] if t.get("status") == "inProgress"]
        if not running or not isinstance(running[0], str):
            return None
        try:
            result = await self._call("turn/steer", {**params, "expectedTurnId": running[0]})
        except HarnessRefused:
            return None  # the turn ended in between: nothing was written
        turn_id = result.get("turnId") if isinstance(result, dict) else None
        return InjectResult(State.ACCEPTED, evidence={"codex": "turn/steer", "turn_id": turn_id or running[0]})

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        """One request on the kept connection; a connection found closed before anything was sent is opened again
        once (the server may have restarted or dropped an idle client)."""
        for attempt in (1, 2):
            server = self._server
            if server is None:
                try:
                    server = self._server = await AppServer.connect(self.endpoint or "")
                except AppServerGone as exc:
                    raise PreSendFailure(str(exc)) from None
            try:
                return await server.request(method, params)
            except AppServerError as exc:
                raise HarnessRefused(f"the Codex app-server refused: {exc}") from None
            except AppServerGone as exc:
                self._server = None
                await server.close()
                if exc.sent:
                    raise HarnessDisconnected(str(exc)) from None
                if attempt == 2:
                    raise PreSendFailure(str(exc)) from None
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._server is not None:
            await self._server.close()
            self._server = None
