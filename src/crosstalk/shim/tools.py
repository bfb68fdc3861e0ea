"""The tools a harness session gets from `crosstalk mcp`, behind the router seam (shim/router.py).

Every call binds its caller from its own evidence, as the harness kinds tell it (crosstalk/harness/: the shim's
`--harness` kind, or for auto each kind in registry order), and is served by that session's agent (shim/pool.py),
created on its first bound call. Without evidence only list_agents is served.

claim and release travel to the target's own process (its journal has a single writer): shim/claiming.py.
Superseded sessions (Claude `/clear`) are retired by the pool, on their kind's proof.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crosstalk import harness as kinds
from crosstalk.core import untrusted
from crosstalk.core.errors import CrosstalkError
from crosstalk.core.kinds import Kind
from crosstalk.core.states import DELIVERED_STATES, ERROR_STATES, Outcome, Reason, State
from crosstalk.fs import trace
from crosstalk.registry.errors import AmbiguousName
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.claiming import CLAIM_TOOLS
from crosstalk.shim.router import CallContext, ToolResult
from crosstalk.shim.schemas import check_arguments, tool_definitions

if TYPE_CHECKING:  # the agent machinery loads on the first bound call, not at `initialize` (start-up cost)
    from crosstalk.agent import AgentHost
    from crosstalk.harness.base import SessionIdentity
    from crosstalk.shim.held import HeldSends
    from crosstalk.shim.pool import AdapterFactory, AgentPool
    from crosstalk.shim.replying import InformReplies
    from crosstalk.shim.sending import Sender

REPLY_HINTS = {
    "no_such_message": "no ask or inform with this message_id was delivered to you here (or it opened no route); "
    "check receive_message(state='all') for the id, or answer the sender with send_message",
    "not_an_ask": "that message owes no reply; if you want to answer, use send_message to its sender",
    "route_expired": "informs can be replied to for 1 hour after they were delivered; answer the sender with "
    "send_message instead",
    "sender_unverified": "that message came from an unverified or external sender: there is no address to reply to",
    "already_replied": "you already replied to this message with different text (one reply per message); send a "
    "follow-up with send_message if needed",
    "ask_closed": "the ask is closed (its deadline passed or it was canceled); tell the sender with send_message "
    "if the answer still matters",
}


class ShimRouter:
    """crosstalk.shim.router.ToolRouter for one `crosstalk mcp` process."""

    def __init__(
        self,
        harness: str,
        paths: StatePaths,
        *,
        adapters: AdapterFactory | None = None,
        environ: Mapping[str, str] | None = None,
        cwd: str | None = None,
        root_warning: str | None = None,
    ) -> None:
        """`root_warning`: the state-root mismatch between this shim and its harness (shim/environment.py), told
        with the first call of every session and with every listing."""
        if harness not in kinds.choices():
            raise ValueError(f"unknown harness {harness!r} (expected one of: {', '.join(kinds.choices())})")
        self.harness = harness
        self.paths = paths
        self.environ = dict(os.environ if environ is None else environ)
        self._adapters = adapters
        self._cwd = cwd
        self.root_warning = root_warning
        self._pool: AgentPool | None = None
        self._sender: Sender | None = None
        self._inform_replies: InformReplies | None = None
        self._held: HeldSends | None = None
        self._defs = tool_definitions() + CLAIM_TOOLS
        self._schemas = {d["name"]: d["inputSchema"] for d in self._defs}
        self._replies: dict[tuple[str, str], dict[str, Any]] = {}  # (agent_id, message_id) → first reply result

    @property
    def pool(self) -> AgentPool:
        if self._pool is None:
            from crosstalk.shim.pool import AgentPool

            self._pool = AgentPool(
                self.paths,
                self.environ,
                adapters=self._adapters,
                cwd=self._cwd,
                answer=lambda host, mid, text: self._tool_reply(host, {"message_id": mid, "text": text}),
            )
        return self._pool

    @property
    def sender(self) -> Sender:
        if self._sender is None:
            from crosstalk.shim.sending import Sender

            self._sender = Sender(self.paths)
        return self._sender

    @property
    def held(self) -> HeldSends:
        if self._held is None:
            from crosstalk.shim.held import HeldSends

            self._held = HeldSends(self.paths, self.sender.client_for)
        return self._held

    @property
    def inform_replies(self) -> InformReplies:
        if self._inform_replies is None:
            from crosstalk.shim.replying import InformReplies
            from crosstalk.shim.sending import resolve_target

            self._inform_replies = InformReplies(lambda to: resolve_target(self.paths, to), self._forward)
        return self._inform_replies

    def tools(self) -> list[dict[str, Any]]:
        return [dict(d) for d in self._defs]

    async def close(self) -> None:
        if self._held is not None:
            await self._held.close()
        if self._sender is not None:
            await self._sender.close()
        if self._pool is not None:
            await self._pool.close()
        if (relay_local := sys.modules.get("crosstalk.relay.local")) is not None:  # loaded by a send to NAME@ALIAS
            await relay_local.close_kept()  # its kept connections to the relay process's socket

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        """One MCP tools/call: the caller's session is bound from the call's own evidence (`take_evidence`)."""
        given, meta = kinds.take_evidence(self.harness, arguments, ctx.meta)
        args = self._checked(name, given)
        if isinstance(args, ToolResult):
            return args
        return await self._serve(name, args, self._identify(ctx, meta))

    async def call_as(self, ident: SessionIdentity, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """One tool for a session its caller names itself (exthost/: one session, no MCP call to bind it from)."""
        args = self._checked(name, arguments)
        if isinstance(args, ToolResult):
            return args
        return await self._serve(name, args, ident)

    def _checked(self, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any] | ToolResult:
        """The arguments, checked against the tool's schema; the error result when the tool or they are wrong."""
        schema = self._schemas.get(name)
        if schema is None:
            return _result(_call_answer(State.ERROR, Reason.UNKNOWN_TOOL, hint=f"tools: {', '.join(self._schemas)}"))
        args, problem = check_arguments(schema, dict(arguments) if arguments is not None else None)
        if problem is not None:
            return _result(_call_answer(State.INVALID_ARGUMENTS, problem))
        return args

    async def _serve(self, name: str, args: dict[str, Any], ident: SessionIdentity | None) -> ToolResult:
        if ident is not None:  # from _meta: a lone surrogate there would fail on the first write, far from here
            try:
                for field in (ident.session_ref, ident.preferred_name or ""):
                    untrusted.text(field, what="_meta (the session's identity)")
            except untrusted.UntrustedInput as exc:
                return _result(_call_answer(State.INVALID_ARGUMENTS, str(exc)))
        if name == "list_agents":
            return _result(await self._list_agents(ident))
        if ident is None:
            hint = (
                "this call carries nothing that identifies your session, so only list_agents is served; "
                "restart the MCP connection from inside a Claude Code session or a Codex thread"
            )
            return _result(_call_answer(State.UNBOUND, Reason.NO_BINDING_EVIDENCE, hint=hint))
        bound = await self.bind(ident)
        if isinstance(bound, dict):
            return _result(bound)
        host, created = bound
        handler = getattr(self, f"_tool_{name}")
        out = await handler(host, args)
        if created:
            _first_call_notes(host, out, self.root_warning)
        return _result(out)

    # ------------------------------------------------------------------ binding
    def _identify(self, ctx: CallContext, meta: Mapping[str, Any]) -> SessionIdentity | None:
        from crosstalk.harness.base import CallEvidence

        return kinds.identify(self.harness, CallEvidence(meta, ctx.parent_pid, self.environ))

    async def bind(self, ident: SessionIdentity) -> tuple[AgentHost, bool] | dict[str, Any]:
        """The session's agent, registered on first use: (host, created by this call), or why it could not be."""
        from crosstalk.shim.pool import PoolClosed

        try:
            host, created = await self.pool.get(ident)
        except PoolClosed:
            return _call_answer(State.UNBOUND, Reason.SHUTTING_DOWN)
        except CrosstalkError as exc:
            hint = "your session could not be registered; list_agents still works"
            return _call_answer(State.UNBOUND, Reason.REGISTRATION_FAILED, detail=str(exc), hint=hint)
        if created and host.state.sent:
            from crosstalk.shim.bus_asks import rearm

            rearm(host)  # the deadlines of bus asks made before this shim bound the agent
        if created and host.state.held_sends:
            await self.held.resume(host)  # held sends this agent made before: watch them again, or settle them
        return host, created

    # ------------------------------------------------------------------ tools
    async def _list_agents(self, ident: SessionIdentity | None) -> dict[str, Any]:
        from crosstalk.shim.listing import agent_rows

        out: dict[str, Any] = {"state": "ok"}
        me: str | None = None
        if ident is not None:
            bound = await self.bind(ident)
            if isinstance(bound, dict):
                out["note"] = f"your session is not registered: {bound.get('detail') or bound['reason']}"
            else:
                me = bound[0].agent_id
                if bound[1]:
                    _first_call_notes(bound[0], out, self.root_warning)
        # In a thread: discovery may ask an app-server (Codex) over a socket, which must not stall the event loop.
        out["agents"] = await asyncio.to_thread(agent_rows, self.paths, self.environ, me)
        if ident is None:
            out["hint"] = "this call carried no session identity: you can list agents but not send"
        if self.root_warning:
            out["warning"] = self.root_warning
        return out

    async def _send(self, host: AgentHost, to: str, text: str, **fields: Any) -> dict[str, Any]:
        from crosstalk.core.message import new_message
        from crosstalk.shim.relay_sends import relay_address, send_away
        from crosstalk.shim.routing import RouteKind, away_route, live_route, route
        from crosstalk.shim.sending import ambiguous_name, journal_sent, unknown_name

        to = relay_address(to)  # `@relay:ALIAS/NAME`, a sender a relay brought: NAME@ALIAS
        # A live agent is found in the registry inline; anything else in a thread: a native session's lookup may
        # ask an app-server (Codex) over a socket.
        if (where := live_route(self.paths, to) or away_route(to)) is None:
            where = await asyncio.to_thread(route, self.paths, to, self.environ)
        kind = fields.get("kind", "inform")
        if where.kind is RouteKind.BUS:  # NAME@MACHINE: the relay this state root joined, else the git bus
            return await send_away(host, self.paths, to, text, self.held, **fields)
        if where.kind is RouteKind.NATIVE:
            return await self.held.send_native(host, to, text, where.sessions, kind, self.environ)
        if where.agent is None:
            if isinstance(where.problem, AmbiguousName):
                return ambiguous_name(to, where.problem.candidates)
            return unknown_name(to)
        target = where.agent
        try:
            msg = new_message(target.name, text, from_=host.name, **fields)
        except CrosstalkError as exc:
            return Outcome("", State.INVALID_ARGUMENTS, str(exc)).answer()
        ask = msg.kind is Kind.ASK
        if not await journal_sent(host, msg, target.agent_id):
            return Outcome(msg.message_id, State.UNREACHABLE, Reason.JOURNAL_FAILED).answer(to=target.name)
        trace.mark("a2a_send")
        result = await self.sender.send(host, target, msg, return_immediately=ask)
        await self.sender.count(host, target.agent_id, target.name, result)
        if (result["state"] == State.HELD or result.get("settles")) and result.get("task_id"):
            await self.held.held_by_agent(host, msg.message_id, target.name, target.agent_id, result)
        if result["state"] == State.UNREACHABLE and not target.inbound_reachable:
            result.setdefault("hint", f"{target.name} cannot receive messages: {target.inbound_reason}")
        return result

    async def _tool_send_message(self, host: AgentHost, args: dict[str, Any]) -> dict[str, Any]:
        return await self._send(host, args["to"], args["text"], kind=args["kind"], delivery=args["delivery"])

    async def _tool_ask(self, host: AgentHost, args: dict[str, Any]) -> dict[str, Any]:
        result = await self._send(host, args["to"], args["text"], kind="ask", deadline_seconds=args["deadline_seconds"])
        if result.get("state") in _ASK_UNDER_WAY:
            result.setdefault(
                "hint", "the answer arrives in your session as a message with in_reply_to = this message_id"
            )
        return result

    async def _tool_reply(self, host: AgentHost, args: dict[str, Any]) -> dict[str, Any]:
        from crosstalk.shim.replying import delivery_settled, is_inform_reply
        from crosstalk.tasks.ledger import ReplyError

        mid, text = args["message_id"], args["text"]
        await delivery_settled(host, mid)
        if is_inform_reply(host, mid):  # an inform: its route back to the sender (shim/replying.py)
            out = await self.inform_replies.reply(host, mid, text)
            if out.get("state") == "rejected":
                out.setdefault("hint", REPLY_HINTS.get(out.get("reason", "")))
            return out
        first = self._replies.get((host.agent_id, mid))
        task = host.task_holding(mid)
        was_terminal = task is not None and task.view.terminal
        try:
            view = await host.reply(mid, text)
        except ReplyError as exc:
            return {"state": "rejected", "reason": exc.code, "message_id": mid, "hint": REPLY_HINTS.get(exc.code)}
        except CrosstalkError as exc:
            return Outcome(mid, State.UNKNOWN, Reason.REPLY_NOT_RECORDED).answer(detail=str(exc))
        if was_terminal:  # a repeat with the same text: the first result, nothing sent again
            return dict(first) if first else {"state": "replied", "in_reply_to": mid, "task_id": view.task_id}
        answer = [h for h in view.history if h.role == "agent"]
        reply_id = answer[-1].message_id if answer else None
        result: dict[str, Any] = {"state": "replied", "message_id": reply_id, "in_reply_to": mid}
        result["task_id"] = view.task_id
        result["forwarded"] = await self._forward(host, view.creator, reply_id, mid, text)
        self._replies[(host.agent_id, mid)] = result
        return dict(result)

    async def _forward(
        self, host: AgentHost, creator: str, reply_id: str | None, in_reply_to: str, text: str
    ) -> dict[str, Any]:
        """Carry the answer into the asker's session: an inform with in_reply_to, sent as this agent. The asker's
        A2A task already holds the reply; this is how its model sees it. A reply to an inform travels the same way
        (shim/replying.py), with `creator` the inform's verified sender."""
        from crosstalk.core.message import new_message
        from crosstalk.shim.relay_sends import forward_away
        from crosstalk.shim.sending import resolve_target

        target = resolve_target(self.paths, creator)
        if isinstance(target, dict):  # another machine's agent's task (A2A across the relay), or the asker is gone
            return await forward_away(host, creator, reply_id, in_reply_to, text, _call_answer)
        msg = new_message(target.name, text, from_=host.name, in_reply_to=in_reply_to, message_id=reply_id)
        result = await self.sender.send(host, target, msg, return_immediately=False)
        await self.sender.count(host, target.agent_id, target.name, result)
        return {k: v for k, v in result.items() if k in ("state", "reason", "to", "hint")}

    async def _tool_receive_message(self, host: AgentHost, args: dict[str, Any]) -> dict[str, Any]:
        from crosstalk.shim.mailbox import page

        return page(host, args["cursor"], args["state"])

    async def _tool_claim(self, host: AgentHost, args: dict[str, Any]) -> dict[str, Any]:
        from crosstalk.shim.claiming import claim_or_release

        return await claim_or_release("claim", self.paths, self.sender, host, args["name"])

    async def _tool_release(self, host: AgentHost, args: dict[str, Any]) -> dict[str, Any]:
        from crosstalk.shim.claiming import claim_or_release

        return await claim_or_release("release", self.paths, self.sender, host, args["name"])


def _first_call_notes(host: AgentHost, out: dict[str, Any], root_warning: str | None) -> None:
    notes = [f"you are registered as {host.name!r}"]
    if root_warning:
        notes.append(root_warning)
    if host.name_notice:
        notes.append(host.name_notice)
    if not host.inbound.inbound_reachable:
        notes.append(
            f"messages to this session cannot be delivered into it ({host.inbound.reason}): you can send and "
            "ask, but answers and messages for you are unreachable"
        )
    out["note"] = "; ".join(notes)


def _call_answer(state: State, reason: str, **extra: Any) -> dict[str, Any]:
    """The answer to a call that carried no message (or lost it before it had an id)."""
    return Outcome("", state, reason).answer(**extra)


def _result(data: dict[str, Any]) -> ToolResult:
    data = {k: v for k, v in data.items() if v is not None or k in ("in_reply_to",)}
    return ToolResult(data, is_error=data.get("state") in ERROR_STATES or data.get("reason") in _ERROR_REASONS)


_ERROR_REASONS = frozenset({Reason.NO_SUCH_AGENT, Reason.AMBIGUOUS_NAME})
_ASK_UNDER_WAY = frozenset({State.SUBMITTED, *DELIVERED_STATES})


def build_router(harness: str) -> ShimRouter:
    """The router `crosstalk mcp` serves: state under CROSSTALK_HOME (else the XDG default), checked against the
    environment the harness that started it was started with."""
    from crosstalk.fs.procinfo import process_environ
    from crosstalk.shim.environment import state_root_mismatch

    paths = StatePaths.from_env()
    warning = state_root_mismatch(paths, process_environ(os.getppid()))
    if warning:
        logging.getLogger(__name__).warning("%s", warning)
    return ShimRouter(harness, paths, root_warning=warning)
