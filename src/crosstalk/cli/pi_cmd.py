"""`crosstalk pi-agent --session ID --cwd DIR`: the core the crosstalk pi extension starts for one pi session
(docs/dev/pi-link.md). It hosts the session's agent through the same tools a shim serves (send_message, ask, reply,
list_agents), delivers into the session over the pi link, and answers the extension's slash commands and tools.

Seed 004's environment, read once at start: PI_CROSSTALK_HANDLE (the name; taken → `-2`, `-3`, …),
PI_CROSSTALK_ROLE (exact lowercase orchestrator | worker | peer; anything else warns and falls through),
PI_CROSSTALK_PARENT (only for a worker: its parent's handle, resolved to the live agent when there is one).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from crosstalk.harness.pi.link import MAX_LINE, PiLink
from crosstalk.policy import BUCKET_NAMES, Role

RESOLVE_EVERY_S = 0.5  # how often a parent given by handle is looked for until it is live
MAX_SUFFIX = 99
MAX_SETTINGS = 64 * 1024  # a handle is at most 64 characters: a thousand peers fit
MAX_TAG = 256  # an @scheme:topic acceptFrom entry
DELIVERED = {"accepted": "immediate", "queued": "queued"}


def run_pi_agent(args: Any) -> int:
    return asyncio.run(PiCore(args.session, args.cwd, dict(os.environ)).run())


class PiCore:
    def __init__(self, session: str, cwd: str, environ: dict[str, str]) -> None:
        self.session, self.cwd, self.environ = session, cwd, environ
        self.parent_handle: str | None = None
        self.handle: str | None = None
        self.link: PiLink | None = None
        self.router: Any = None
        self.host: Any = None

    # ------------------------------------------------------------------ lifecycle
    async def run(self) -> int:
        from crosstalk.harness.pi.adapter import PiAdapter
        from crosstalk.registry.paths import StatePaths
        from crosstalk.shim.tools import ShimRouter

        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        out = sys.stdout.buffer
        link = self.link = PiLink(reader, lambda data: (out.write(data), out.flush()))
        paths = StatePaths.from_env(self.environ)
        self.router = ShimRouter("pi", paths, adapters=lambda _ident: PiAdapter(link), environ=self.environ,
                                 cwd=self.cwd)  # fmt: skip
        reading = asyncio.ensure_future(link.run())
        try:
            await self._register()
            link.serve(self._op)
            link.send({"t": "ready", **self._state()})
            resolving = asyncio.ensure_future(self._resolve_parent())
            await reading
            resolving.cancel()
        finally:
            reading.cancel()
            await self.router.close()
        return 0

    async def _register(self) -> None:
        """The environment first (seed 004: applied once at session start), then what this session had set
        before (its saved settings, when pi resumes it), then the defaults."""
        from crosstalk.core.errors import CrosstalkError
        from crosstalk.policy import parse_role

        saved = self._load()
        handle = self._env_handle() or saved.get("handle")
        raw_role = self.environ.get("PI_CROSSTALK_ROLE", "")
        role = None
        if raw_role.strip():
            try:
                role = parse_role(raw_role)
            except CrosstalkError:
                self._notice("warning", f"PI_CROSSTALK_ROLE={raw_role!r} is not orchestrator, worker or peer: ignored")
        from_env = role is not None
        if role is None and saved.get("role") in {r.value for r in Role}:
            role = Role(saved["role"])
        self.handle = self._free_handle(handle) if isinstance(handle, str) and handle else None
        result = await self.router.call("list_agents", {}, self._ctx())
        self.host = next((h for h in self.router.pool.hosts() if h.config.session_ref == self.session), None)
        if self.host is None:
            raise SystemExit(f"crosstalk pi-agent: the session could not be registered: {dict(result.data)}")
        if role is not None and role is not Role.PRIMARY:
            self._set_role(role)
        if not from_env:  # a role from the environment resets acceptFrom to its defaults
            accept = saved.get("accept_from")
            if isinstance(accept, list) and all(isinstance(a, str) for a in accept):
                self.host.config.accept_from = tuple(accept)
        self.host.config.peers = tuple(saved.get("peers") or ())
        parent = (self.environ.get("PI_CROSSTALK_PARENT") or "").strip() or saved.get("parent") or ""
        if parent and self.host.config.role is Role.WORKER:
            self._set_parent(str(parent))
        elif parent and self.environ.get("PI_CROSSTALK_PARENT", "").strip():
            self._notice("warning", "PI_CROSSTALK_PARENT is only meaningful for a worker: ignored")
        self._save()

    def _settings_path(self) -> Any:
        from crosstalk.core.ids import agent_id_for
        from crosstalk.registry.paths import StatePaths

        return StatePaths.from_env(self.environ).root / "pi" / f"{agent_id_for('pi', self.session)}.json"

    def _env_handle(self) -> str | None:
        """PI_CROSSTALK_HANDLE when it is a valid handle; an invalid one is named on stderr and to the user."""
        from crosstalk.registry.names import InvalidName, validate_name

        raw = (self.environ.get("PI_CROSSTALK_HANDLE") or "").strip()
        if not raw:
            return None
        try:
            return validate_name(raw)
        except InvalidName as exc:
            shown = raw if len(raw) <= 80 else raw[:80] + "…"
            text = f"PI_CROSSTALK_HANDLE={shown!r} is not a valid handle ({exc.problem}): ignored"
            print(f"crosstalk pi-agent: {text.encode('utf-8', 'backslashreplace').decode()}", file=sys.stderr)
            self._notice("warning", text)
            return None

    def _load(self) -> dict[str, Any]:
        """The saved settings, each entry checked: a bad one is skipped with a warning, never the whole file."""
        from crosstalk.fs.reading import read_json_object

        try:
            saved = read_json_object(self._settings_path(), MAX_SETTINGS)
        except ValueError as exc:
            self._notice("warning", f"saved crosstalk settings ignored: {exc}")
            return {}
        out: dict[str, Any] = {"role": saved.get("role")}
        for key in ("handle", "parent"):
            value = saved.get(key)
            if value is not None and (problem := _bad_handle(value, key)):
                self._notice("warning", f"saved {problem}: skipped")
            elif value is not None:
                out[key] = value
        for key in ("peers", "accept_from"):
            entries = saved.get(key)
            if entries is None:
                continue
            if not isinstance(entries, list):
                self._notice("warning", f"saved {key} is not a list: skipped")
                continue
            check = _bad_handle if key == "peers" else _bad_accept
            out[key] = []
            for entry in entries:
                if problem := check(entry, "peer" if key == "peers" else "acceptFrom entry"):
                    self._notice("warning", f"saved {problem}: skipped")
                else:
                    out[key].append(entry)
        return out

    def _save(self) -> str | None:
        """Write this session's settings; the reason when they cannot be (too large: nothing is written)."""
        import json

        from crosstalk.fs.atomic import atomic_write
        from crosstalk.registry.paths import ensure_private_dir

        config = self.host.config
        data = {"handle": self.handle, "role": config.role.value, "parent": self.parent_handle,
                "accept_from": list(config.accept_from) if config.accept_from is not None else None,
                "peers": list(config.peers)}  # fmt: skip
        raw = (json.dumps(data) + "\n").encode()
        if len(raw) > MAX_SETTINGS:
            return f"this session's settings would be {len(raw)} bytes, over the {MAX_SETTINGS}-byte cap: not saved"
        path = self._settings_path()
        try:
            ensure_private_dir(path.parent)
            atomic_write(path, raw)
        except OSError as exc:
            self._notice("warning", f"could not save this session's crosstalk settings: {exc}")
        return None

    def _ctx(self) -> Any:
        from crosstalk.shim.router import CallContext

        meta = {"pi/session": self.session, **({"pi/handle": self.handle} if self.handle else {})}
        return CallContext(meta=meta, parent_pid=os.getppid())

    def _notice(self, level: str, text: str) -> None:
        if self.link is not None:
            self.link.send({"t": "notice", "level": level, "text": text})

    # ------------------------------------------------------------------ the extension's requests
    async def _op(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            return {"ok": False, "reason": f"unknown_op: {op}"}
        return await handler(args)

    async def _tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.router.call(name, args, self._ctx())
        data = dict(result.data)
        return {"ok": not result.is_error and data.get("state") not in ("rejected", "unreachable", "unknown"),
                **data}  # fmt: skip

    async def _op_send(self, args: dict[str, Any]) -> dict[str, Any]:
        to, text = str(args.get("to") or ""), str(args.get("text") or "")
        mode, kind = str(args.get("mode") or "auto"), str(args.get("kind") or "user")
        delivery = {"auto": "auto", "steer": "steer", "followUp": "next_turn", "followup": "next_turn"}.get(mode)
        if not to or not text or delivery is None:
            return {"ok": False, "reason": "usage: send needs a peer, text, and mode auto|steer|followUp"}
        if kind == "ask":
            out = await self._tool("ask", {"to": to, "text": text})
        elif kind == "user":
            out = await self._tool("send_message", {"to": to, "text": text, "delivery": delivery})
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
        from crosstalk.registry.discovery import list_descriptors

        for d in list_descriptors(self.host.paths):
            if handle in (d.name, d.agent_id):
                owner = self._name_of(d.owner)
                return {"ok": True, "match": {"handle": d.name, "id": d.agent_id, "harness": d.harness,
                                              "role": d.role, "parent": owner}}  # fmt: skip
        return {"ok": True, "match": None}

    async def _op_set(self, args: dict[str, Any]) -> dict[str, Any]:
        from crosstalk.core.errors import CrosstalkError
        from crosstalk.policy import parse_role

        applied: dict[str, Any] = {}
        for key in ("handle", "parent", "role"):
            problem = _bad_handle(str(args[key]), key) if args.get(key) else None
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

        if problem := _bad_accept(entry, "entry"):
            return {"ok": False, "reason": problem}
        before = self.host.config.accept_from
        current = set(self.host.view().effective_accept_from())
        current = current | {entry} if on else current - {entry}
        self.host.config.accept_from = tuple(sorted(current))
        if problem := self._changed():
            self.host.config.accept_from = before
            return {"ok": False, "reason": problem}
        return {"ok": True, "current": self._state()}

    def _peer(self, handle: str, on: bool) -> dict[str, Any]:
        if not handle:
            return {"ok": False, "reason": "usage: peer add|rm <handle>"}
        if on and (problem := _bad_handle(handle, "peer handle")):
            return {"ok": False, "reason": problem}
        before = self.host.config.peers
        self.host.config.peers = tuple([p for p in before if p != handle] + ([handle] if on else []))
        if problem := self._changed():
            self.host.config.peers = before
            return {"ok": False, "reason": problem}
        return {"ok": True, "current": self._state()}

    def _set_role(self, role: Role) -> Role:
        """A role change resets acceptFrom to the role's defaults; a worker keeps its parent, others lose it."""
        config = self.host.config
        config.role, config.accept_from = role, None
        if role is not Role.WORKER:
            config.owner, self.parent_handle = None, None
        self.host.republish(role.value, config.owner)
        return role

    def _set_parent(self, handle: str) -> str:
        """The parent by handle: its agent_id now when it is live, else looked for until it is."""
        self.parent_handle = handle
        self._resolve_once()
        return handle

    def _resolve_once(self) -> bool:
        from crosstalk.registry.discovery import list_descriptors

        if self.parent_handle is None:
            return True
        for d in list_descriptors(self.host.paths):
            if self.parent_handle in (d.name, d.agent_id) and d.agent_id != self.host.agent_id:
                self.host.config.owner = d.agent_id
                self.host.republish(self.host.config.role.value, d.agent_id)
                return True
        return False

    async def _resolve_parent(self) -> None:
        while True:
            if self.parent_handle is not None and self.host.config.owner is None:
                await asyncio.to_thread(self._resolve_once)
            await asyncio.sleep(RESOLVE_EVERY_S)

    def _free_handle(self, handle: str) -> str:
        """`handle`, else `handle-2`, `handle-3`, … : the first no other live agent holds (seed 004)."""
        from crosstalk.registry.discovery import list_descriptors
        from crosstalk.registry.paths import StatePaths

        mine = self.host.agent_id if self.host is not None else None
        held = {d.name for d in list_descriptors(StatePaths.from_env(self.environ)) if d.agent_id != mine}
        for n in range(1, MAX_SUFFIX + 1):
            name = handle if n == 1 else f"{handle}-{n}"
            if name not in held:
                return name
        return handle

    def _name_of(self, agent_id: str | None) -> str | None:
        from crosstalk.registry.discovery import list_descriptors

        if agent_id is None:
            return None
        return next((d.name for d in list_descriptors(self.host.paths) if d.agent_id == agent_id), agent_id)

    def _state(self) -> dict[str, Any]:
        from crosstalk.registry.discovery import list_descriptors

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
        if self.link is not None:
            self.link.send({"t": "state", **self._state()})
        return None


def _bad_handle(value: object, what: str) -> str | None:
    """Why `value` cannot be a handle (a name or an agent_id), naming it briefly; None when it can."""
    from crosstalk.core.errors import UntrustedInput
    from crosstalk.core.ids import is_agent_id
    from crosstalk.core.untrusted import text
    from crosstalk.registry.names import InvalidName, validate_name

    if not isinstance(value, str):
        return f"{what} {value!r} is not text"
    shown = repr(value if len(value) <= 40 else value[:40] + "…")
    try:
        text(value, what=f"{what} {shown}")
    except UntrustedInput as exc:
        return str(exc).encode("utf-8", "backslashreplace").decode()
    if is_agent_id(value) and what in ("peer", "peer handle", "parent"):
        return None
    try:
        validate_name(value)
    except InvalidName as exc:
        return f"{what} {shown} {exc.problem}"
    return None


def _bad_accept(value: object, what: str) -> str | None:
    """Why `value` cannot be an acceptFrom entry (a bucket, a handle or an @scheme:topic tag); None when it can."""
    from crosstalk.core.sender import is_external_tag

    if isinstance(value, str) and len(value) <= MAX_TAG and (value in BUCKET_NAMES or is_external_tag(value)):
        problem = _bad_handle(value, what)
        return problem if problem and "surrogate" in problem else None
    if isinstance(value, str) and _bad_handle(value, what) is None:
        return None
    shown = repr(value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "…")
    shown = shown.encode("utf-8", "backslashreplace").decode()
    return f"{what} {shown} is not a bucket ({', '.join(sorted(BUCKET_NAMES))}), a handle or an @scheme:topic tag"
