"""The crosstalk core of one extension-hosted session: it registers the session's agent, serves the extension's
requests over the link (send, reply, status, inspect, set, allow, deny, peer_add, peer_rm) and tells it the agent's
state as it changes. docs/dev/pi-link.md describes the link as pi speaks it.

The session's settings come, in order, from the environment the harness was started with (read once, at start:
`<PREFIX>_HANDLE`, the name, taken → `-2`, `-3`, …; `<PREFIX>_ROLE`, exact lowercase orchestrator | worker | peer,
anything else warns and falls through; `<PREFIX>_PARENT`, only for a worker, its parent's handle, resolved to the
live agent when there is one), then what the session had saved before (exthost/settings.py), then the defaults.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from crosstalk.agent import AgentHost
from crosstalk.core import untrusted
from crosstalk.core.errors import CrosstalkError
from crosstalk.core.kinds import KIND_ALIASES, PI_MODE_ALIASES, Kind
from crosstalk.core.states import State
from crosstalk.exthost.settings import bad_accept, bad_handle, load_settings, save_settings, settings_path
from crosstalk.harness.base import SessionIdentity
from crosstalk.policy import Role, parse_role
from crosstalk.registry.discovery import list_descriptors
from crosstalk.registry.errors import InvalidName
from crosstalk.registry.names import validate_name
from crosstalk.registry.paths import StatePaths

RESOLVE_EVERY_S = 0.5  # how often a parent given by handle is looked for until it is live
MAX_SUFFIX = 99
# What the extension's send op says of a delivered message: pi's word for each delivered state.
DELIVERED = {State.ACCEPTED.value: "immediate", State.QUEUED.value: "queued"}
FAILED_STATES = frozenset({State.REJECTED.value, State.UNREACHABLE.value, State.UNKNOWN.value})
Op = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class ExtensionHarness:
    """What differs between the harnesses that load crosstalk as an extension."""

    name: str  # its harness kind: the agent's harness and where its sessions' settings are saved
    env_prefix: str  # the environment's settings: <env_prefix>_HANDLE, _ROLE and _PARENT
    program: str  # how this process names itself on stderr


class Link(Protocol):
    """The extension's end: one JSON object per message each way."""

    def send(self, message: dict[str, Any]) -> None: ...

    def serve(self, handler: Op) -> None: ...

    async def run(self) -> None:
        """Read the extension's messages until it closes its end."""
        ...


class ToolAnswer(Protocol):
    @property
    def data(self) -> Mapping[str, Any]: ...

    @property
    def is_error(self) -> bool: ...


class SessionTools(Protocol):
    """The tools a session's agent is served (shim.tools.ShimRouter), for a session named directly."""

    async def bind(self, ident: SessionIdentity) -> tuple[AgentHost, bool] | dict[str, Any]: ...

    async def call_as(self, ident: SessionIdentity, name: str, arguments: Mapping[str, Any]) -> ToolAnswer: ...

    async def close(self) -> None: ...


class ExtensionCore:
    """One session's core: `await ExtensionCore(...).run()` serves it until the extension closes the link."""

    def __init__(
        self,
        harness: ExtensionHarness,
        session: str,
        environ: Mapping[str, str],
        link: Link,
        tools: SessionTools,
    ) -> None:
        self.harness, self.session, self.environ = harness, session, dict(environ)
        self.link, self.tools = link, tools
        self.paths = StatePaths.from_env(self.environ)
        self.settings = settings_path(self.paths, harness.name, session)
        self.parent_handle: str | None = None
        self.handle: str | None = None
        self._host: AgentHost | None = None

    @property
    def host(self) -> AgentHost:
        if self._host is None:
            raise RuntimeError("the session is not registered yet")
        return self._host

    def _env(self, key: str) -> str:
        return self.environ.get(f"{self.harness.env_prefix}_{key}") or ""

    # ------------------------------------------------------------------ lifecycle
    async def run(self) -> int:
        reading = asyncio.ensure_future(self.link.run())
        try:
            await self._register()
            self.link.serve(self._op)
            self.link.send({"t": "ready", **self._state()})
            resolving = asyncio.ensure_future(self._resolve_parent())
            await reading
            resolving.cancel()
        finally:
            reading.cancel()
            await self.tools.close()
        return 0

    async def _register(self) -> None:
        """The environment first (applied once at session start), then what this session had set before (its saved
        settings, when the harness resumes it), then the defaults."""
        saved = load_settings(self.settings, self._warn)
        handle = self._env_handle() or saved.get("handle")
        raw_role = self._env("ROLE")
        role = None
        if raw_role.strip():
            try:
                role = parse_role(raw_role)
            except CrosstalkError:
                self._warn(f"{self.harness.env_prefix}_ROLE={raw_role!r} is not orchestrator, worker or peer: ignored")
        from_env = role is not None
        if role is None and saved.get("role") in {r.value for r in Role}:
            role = Role(saved["role"])
        self.handle = self._free_handle(handle) if isinstance(handle, str) and handle else None
        try:  # the session id comes from the command line: a lone surrogate there would fail at the first write
            untrusted.text(self.session, what="the session id")
            bound: tuple[AgentHost, bool] | dict[str, Any] = await self.tools.bind(self._ident())
        except untrusted.UntrustedInput as exc:
            bound = {"state": "invalid_arguments", "reason": str(exc)}
        if isinstance(bound, dict):
            raise SystemExit(f"{self.harness.program}: the session could not be registered: {bound}")
        host = self._host = bound[0]
        if role is not None and role is not Role.PRIMARY:
            self._set_role(role)
        if not from_env:  # a role from the environment resets acceptFrom to its defaults
            accept = saved.get("accept_from")
            if isinstance(accept, list) and all(isinstance(a, str) for a in accept):
                host.set_accept_from(accept)
        host.set_peers(saved.get("peers") or ())
        parent = self._env("PARENT").strip() or saved.get("parent") or ""
        if parent and host.config.role is Role.WORKER:
            self._set_parent(str(parent))
        elif parent and self._env("PARENT").strip():
            self._warn(f"{self.harness.env_prefix}_PARENT is only meaningful for a worker: ignored")
        self._save()

    def _ident(self) -> SessionIdentity:
        """The session, with the handle it asked for: the agent follows it when it changes."""
        return SessionIdentity(self.harness.name, self.session, self.handle or None)

    def _env_handle(self) -> str | None:
        """<PREFIX>_HANDLE when it is a valid handle; an invalid one is named on stderr and to the user."""
        raw = self._env("HANDLE").strip()
        if not raw:
            return None
        try:
            return validate_name(raw)
        except InvalidName as exc:
            shown = raw if len(raw) <= 80 else raw[:80] + "…"
            text = f"{self.harness.env_prefix}_HANDLE={shown!r} is not a valid handle ({exc.problem}): ignored"
            print(f"{self.harness.program}: {text.encode('utf-8', 'backslashreplace').decode()}", file=sys.stderr)
            self._warn(text)
            return None

    def _save(self) -> str | None:
        """Write this session's settings; the reason when they cannot be (too large: nothing is written)."""
        config = self.host.config
        data = {"handle": self.handle, "role": config.role.value, "parent": self.parent_handle,
                "accept_from": list(config.accept_from) if config.accept_from is not None else None,
                "peers": list(config.peers)}  # fmt: skip
        return save_settings(self.settings, data, self._warn)

    def _warn(self, text: str) -> None:
        self.link.send({"t": "notice", "level": "warning", "text": text})

    # ------------------------------------------------------------------ the extension's requests
    async def _op(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            return {"ok": False, "reason": f"unknown_op: {op}"}
        result: dict[str, Any] = await handler(args)
        return result

    async def _tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.tools.call_as(self._ident(), name, args)
        data = dict(result.data)
        return {"ok": not result.is_error and data.get("state") not in FAILED_STATES, **data}

    async def _op_send(self, args: dict[str, Any]) -> dict[str, Any]:
        to, text = str(args.get("to") or ""), str(args.get("text") or "")
        mode, kind = str(args.get("mode") or "auto"), str(args.get("kind") or "user")
        delivery = PI_MODE_ALIASES.get(mode)
        if not to or not text or delivery is None:
            return {"ok": False, "reason": "usage: send needs a peer, text, and mode auto|steer|followUp"}
        if kind == "ask":
            out = await self._tool("ask", {"to": to, "text": text})
        elif KIND_ALIASES.get(kind) is Kind.INFORM:
            out = await self._tool("send_message", {"to": to, "text": text, "delivery": delivery.value})
        else:
            return {"ok": False, "reason": f"kind {kind!r}: send user or ask here (`crosstalk send --kind` for more)"}
        if out.get("state") in DELIVERED:
            out["delivered"] = DELIVERED[out["state"]]
        return out

    async def _op_reply(self, args: dict[str, Any]) -> dict[str, Any]:
        return await self._tool("reply", {"message_id": str(args.get("message_id") or ""),
                                          "text": str(args.get("text") or "")})  # fmt: skip

    async def _op_status(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, **self._state()}

    async def _op_inspect(self, args: dict[str, Any]) -> dict[str, Any]:
        handle = args.get("handle")
        if not handle:
            return {"ok": True, "self": self._state()}
        for d in list_descriptors(self.paths):
            if handle in (d.name, d.agent_id):
                owner = self._name_of(d.owner)
                return {"ok": True, "match": {"handle": d.name, "id": d.agent_id, "harness": d.harness,
                                              "role": d.role, "parent": owner}}  # fmt: skip
        return {"ok": True, "match": None}

    async def _op_set(self, args: dict[str, Any]) -> dict[str, Any]:
        applied: dict[str, Any] = {}
        for key in ("handle", "parent", "role"):
            problem = bad_handle(str(args[key]), key) if args.get(key) else None
            if problem and (key != "role" or "surrogate" in problem):  # a role's own words come from parse_role
                return {"ok": False, "reason": problem}
        if args.get("handle"):
            name = self._free_handle(str(args["handle"]))
            if not self.host.rename(name):
                return {"ok": False, "reason": f"handle {args['handle']!r} is not a valid name"}
            self.handle = applied["handle"] = name
        if args.get("role"):
            try:
                applied["role"] = self._set_role(parse_role(str(args["role"]))).value
            except CrosstalkError as exc:
                return {"ok": False, "reason": str(exc)}
        if args.get("parent"):
            if self.host.config.role is not Role.WORKER:
                return {"ok": False, "reason": "a parent is only meaningful for a worker (set role worker first)"}
            applied["parent"] = self._set_parent(str(args["parent"]))
        if problem := self._changed():
            return {"ok": False, "reason": problem, "applied": applied}
        return {"ok": True, "applied": applied, "current": self._state()}

    async def _op_allow(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._accept(str(args.get("entry") or ""), True)

    async def _op_deny(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._accept(str(args.get("entry") or ""), False)

    async def _op_peer_add(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._peer(str(args.get("handle") or ""), True)

    async def _op_peer_rm(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._peer(str(args.get("handle") or ""), False)

    # ------------------------------------------------------------------ state
    def _accept(self, entry: str, on: bool) -> dict[str, Any]:
        if problem := bad_accept(entry, "entry"):
            return {"ok": False, "reason": problem}
        before = self.host.config.accept_from
        current = set(self.host.view().effective_accept_from())
        self.host.set_accept_from(sorted(current | {entry} if on else current - {entry}))
        if problem := self._changed():
            self.host.set_accept_from(before)
            return {"ok": False, "reason": problem}
        return {"ok": True, "current": self._state()}

    def _peer(self, handle: str, on: bool) -> dict[str, Any]:
        if not handle:
            return {"ok": False, "reason": "usage: peer add|rm <handle>"}
        if on and (problem := bad_handle(handle, "peer handle")):
            return {"ok": False, "reason": problem}
        before = self.host.config.peers
        self.host.set_peers([p for p in before if p != handle] + ([handle] if on else []))
        if problem := self._changed():
            self.host.set_peers(before)
            return {"ok": False, "reason": problem}
        return {"ok": True, "current": self._state()}

    def _set_role(self, role: Role) -> Role:
        """A role change resets acceptFrom to the role's defaults; a worker keeps its parent, others lose it."""
        self.host.set_role(role)
        if role is not Role.WORKER:
            self.parent_handle = None
        return role

    def _set_parent(self, handle: str) -> str:
        """The parent by handle: its agent_id now when it is live, else looked for until it is."""
        self.parent_handle = handle
        self._resolve_once()
        return handle

    def _resolve_once(self) -> bool:
        if self.parent_handle is None:
            return True
        for d in list_descriptors(self.host.paths):
            if self.parent_handle in (d.name, d.agent_id) and d.agent_id != self.host.agent_id:
                self.host.set_owner(d.agent_id)
                return True
        return False

    async def _resolve_parent(self) -> None:
        while True:
            if self.parent_handle is not None and self.host.config.owner is None:
                await asyncio.to_thread(self._resolve_once)
            await asyncio.sleep(RESOLVE_EVERY_S)

    def _free_handle(self, handle: str) -> str:
        """`handle`, else `handle-2`, `handle-3`, … : the first no other live agent holds."""
        mine = self._host.agent_id if self._host is not None else None
        held = {d.name for d in list_descriptors(self.paths) if d.agent_id != mine}
        for n in range(1, MAX_SUFFIX + 1):
            name = handle if n == 1 else f"{handle}-{n}"
            if name not in held:
                return name
        return handle

    def _name_of(self, agent_id: str | None) -> str | None:
        if agent_id is None:
            return None
        return next((d.name for d in list_descriptors(self.host.paths) if d.agent_id == agent_id), agent_id)

    def _state(self) -> dict[str, Any]:
        view = self.host.view()
        descs = list_descriptors(self.host.paths)
        return {
            "name": self.host.name,
            "agent_id": self.host.agent_id,
            "role": view.role.value,
            "parent": self._name_of(view.owner) if view.owner else self.parent_handle,
            "children": sorted(d.name for d in descs if d.owner == self.host.agent_id),
            "peers": sorted(view.peers),
            "accept_from": sorted(view.effective_accept_from()),
        }

    def _changed(self) -> str | None:
        """Save and tell the extension; the reason when the settings could not be saved (the caller undoes)."""
        if problem := self._save():
            return problem
        self.link.send({"t": "state", **self._state()})
        return None
