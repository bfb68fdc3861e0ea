"""The relay process's local socket (relay/local.sock, 0600 in the 0700 relay dir): how an agent's tool send
(`send_message`, `ask`, `reply` to NAME@ALIAS) and `crosstalk send NAME@ALIAS` cross the relay without a NATS client
or the machine's NATS credentials in any shim or CLI. One JSON line each way per request:

    → {"v": 1, "token": BEARER|absent, "message": Message.to_dict(), "timeout": SECONDS, "keep": true|absent,
       "task"?: {"return_immediately", "task_id"}}
    ← {"v": 1, "result": {"outcome": …, "to": "NAME@ALIAS", "agent_id": ID|null, "no_agent": TEXT|null,
                          "task": VIEW|null, "task_error": {"kind", "message"}|null}, "kept": true}
    ← {"v": 1, "error": "auth"|"bad_frame", "detail": TEXT}

A request with `"keep": true` asks the relay process to keep the connection for the next request (one at a time;
the answer says `"kept": true`); without it, or after an error, the connection closes after the answer.

Who sends: with a token, the agent it names. The sender proves its agent as task frames do (ingress/uds_tasks.py):
the bearer token names a live agent (registry/bearer.py) and the peer process (SO_PEERCRED pid and its start time)
is that agent's own shim or harness, checked once per connection (later requests carry the same token). An A2A task
request (`crosstalk send --a2a --as AGENT NAME@ALIAS`, relay/a2a_out.py) takes the proof the agent's A2A endpoint
takes, its bearer token alone; that proof is never kept for the connection's later requests. The relay process then
sends the message with `from` = that agent's name, the only word the receiving machine takes for who sent it
(relay/wire.py sender_label: `@relay:<this machine>/<name>`). Without a token, an external sender (the CLI): its
`from` must be an external tag (`@cli:bob`), proven by the peer's uid alone, so it can never name an agent.
A unix socket under the state root is not a new port: nothing listens on the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import weakref
from pathlib import Path
from typing import Any

from crosstalk.core.errors import MessageError
from crosstalk.core.message import Message
from crosstalk.core.states import Outcome, State
from crosstalk.ingress.errors import KeptBroken
from crosstalk.ingress.frames import KEPT_TAIL
from crosstalk.ingress.uds_kept import KeptConnections
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.a2a_wire import task_params
from crosstalk.relay.config import relay_dir
from crosstalk.relay.link import Link
from crosstalk.relay.send import RemoteResult, request_on
from crosstalk.relay.wire import MAX_FRAME_BYTES, split_remote

VERSION = 1
LINE_LIMIT = MAX_FRAME_BYTES + 4096  # a frame's message plus the token and the envelope
READ_TIMEOUT_S = 10.0
KEEP_IDLE_S = 90.0  # a kept connection with no next request this long is closed (the sender's idle close is sooner)
MAX_REQUESTS = 10_000  # requests served on one connection; the last is answered without `kept`
MAX_TIMEOUT_S = 120.0
NOT_SERVING = "relay:not_serving"
LOCAL_FAILED = "relay:local_failed"
AUTH = "relay:sender_refused"
NOT_SERVING_DETAIL = "no relay process serves this machine: `crosstalk relay join` starts it"


def local_socket_path(paths: StatePaths) -> Path:
    return relay_dir(paths) / "local.sock"


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps({"v": VERSION, **obj}, ensure_ascii=False) + "\n").encode("utf-8")


class LocalDesk:
    """The relay process's side: checks the sender's proof, then sends on the process's one NATS link."""

    def __init__(self, paths: StatePaths, link: Link) -> None:
        from crosstalk.registry.bearer import BearerDirectory

        self.paths = paths
        self.link = link
        self.bearers = BearerDirectory(paths)
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        path = local_socket_path(self.paths)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by a relay process that died: we hold serve.lock, so the name is ours
        old = os.umask(0o177)  # the socket is created 0600: no connection can come in while it is wider
        try:
            self.server = await asyncio.start_unix_server(self._on_connect, path=str(path), limit=LINE_LIMIT)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1)
            self.server = None
        with contextlib.suppress(FileNotFoundError):
            local_socket_path(self.paths).unlink()

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests one at a time, each answered before the next is read, while each asks to keep
        it (`"keep": true`, answered `"kept": true`); the sender's proof is checked once per connection."""
        from crosstalk.ingress.uds_peers import peer_credentials

        try:
            pid, uid = peer_credentials(writer.get_extra_info("socket"))
            proven: tuple[str, Descriptor] | None = None  # (token, its agent) once the first request proved it
            wait = READ_TIMEOUT_S
            for _ in range(MAX_REQUESTS):
                try:
                    raw = await asyncio.wait_for(reader.readuntil(b"\n"), wait)
                except asyncio.IncompleteReadError:
                    return  # the sender closed between requests
                answer, keep, proven = await self._serve(raw, pid, uid, proven)
                writer.write(answer)
                await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
                if not keep:
                    return
                wait = KEEP_IDLE_S
        except (TimeoutError, ConnectionError, asyncio.LimitOverrunError):
            pass  # the sender went away, or sent no whole line: nothing was sent for it
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def _serve(
        self, raw: bytes, pid: int, uid: int, proven: tuple[str, Descriptor] | None
    ) -> tuple[bytes, bool, tuple[str, Descriptor] | None]:
        """One request: (the answer line, whether the connection is kept for the next, the connection's proof).
        With a token, the sender is the agent it names, proven by the peer being that agent's own process (checked
        on the connection's first request; later ones must carry the same token). Without one, an external sender
        (`crosstalk send`): `from` must be an external tag, proven by the peer's uid alone."""
        from crosstalk.core.ids import is_external_tag
        from crosstalk.fs.procinfo import proc_start_time

        if uid != os.getuid():
            return _line({"error": "auth", "detail": "the peer runs as another user"}), False, None
        try:
            obj = json.loads(raw.decode("utf-8"))
            token, data, timeout = obj.get("token"), obj["message"], float(obj.get("timeout") or 60.0)
            if obj.get("v") != VERSION or not isinstance(token, str | None) or not isinstance(data, dict):
                raise ValueError("expected {v: 1, token, message}")
            task = None if obj.get("task") is None else task_params(obj["task"])
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return _line({"error": "bad_frame", "detail": f"not a local relay request: {exc}"}), False, None
        keep = obj.get("keep") is True
        if token is None:
            sender = data.get("from")
            if task is not None:
                return _line({"error": "auth", "detail": "an A2A task needs its agent's bearer token"}), False, None
            if not isinstance(sender, str) or not is_external_tag(sender):
                detail = f"an external sender's from must be @scheme:topic, not {sender!r}"
                return _line({"error": "bad_frame", "detail": detail}), False, None
        elif proven is not None and hmac.compare_digest(proven[0], token):
            sender = proven[1].name  # proven on this connection's first request: the peer process is fixed
        else:
            desc = self.bearers.lookup(token)  # cached (a stat per lookup); reread only when the registry changed
            if desc is None:
                return (
                    _line({"error": "auth", "detail": "the bearer token names no live agent of this machine"}),
                    False,
                    None,
                )
            sender = desc.name
            if task is None:  # a tool send: the peer must be the agent's own process, and that proof is kept
                started = proc_start_time(pid)
                if started is None or not desc.served_by(pid, started):
                    return _line({"error": "auth", "detail": f"the peer process is not {desc.name}'s own"}), False, None
                proven = (token, desc)
        try:
            msg = Message.from_dict({**data, "from": sender})  # who sent it: the proof's word, never the frame's
        except MessageError as exc:
            return _line({"error": "bad_frame", "detail": f"invalid message: {exc}"}), keep, proven
        if split_remote(msg.to) is None:
            return _line({"error": "bad_frame", "detail": f"{msg.to!r} is not a NAME@ALIAS address"}), keep, proven
        result = await request_on(self.link, msg, timeout=min(max(timeout, 0.1), MAX_TIMEOUT_S), task=task)
        out = {"outcome": result.outcome.to_dict(), "to": result.to, "agent_id": result.agent_id}
        out.update(no_agent=result.no_agent, task=result.task, task_error=result.task_error)
        answer = _line({"result": out})
        return (answer[:-2] + KEPT_TAIL if keep else answer), keep, proven


async def send_via_local_relay(
    paths: StatePaths, token: str, msg: Message, *, timeout: float, task: dict[str, Any] | None = None
) -> RemoteResult:
    """An agent's send to NAME@ALIAS through this machine's relay process (`token`: the agent's bearer token), on a
    connection kept for this process's next sends (one request at a time on each; several at once take several;
    idle ones close after IDLE_S, and all at close_kept()). Bounded: `timeout` for the remote answer plus the local
    socket's own. A kept connection that broke after the request left (the relay process restarted) is retried
    once on a fresh one: the same message_id, so the receiving agent answers a copy it took from its journal."""

    def failed(state: State, reason: str, detail: str) -> RemoteResult:
        return RemoteResult(Outcome(msg.message_id, state, reason, {"detail": detail, "relay": True}), msg.to)

    from crosstalk.ingress.errors import KeptUnreachable

    extra = {} if task is None else {"task": task}
    line = _line({"token": token, "message": msg.to_dict(), "timeout": timeout, "keep": True, **extra})
    conns = _kept(local_socket_path(paths))
    try:
        raw = await conns.request(line, timeout + READ_TIMEOUT_S)
    except KeptUnreachable as exc:
        return failed(State.UNREACHABLE, NOT_SERVING, f"{NOT_SERVING_DETAIL} ({exc})")
    except (KeptBroken, TimeoutError, asyncio.LimitOverrunError) as exc:
        hint = f"resend it with the same message_id ({msg.message_id}): the receiver answers from its journal"
        return failed(State.UNKNOWN, LOCAL_FAILED, f"the relay process did not answer ({exc!r}); {hint}")
    try:
        obj = json.loads(raw.decode("utf-8"))
        if "error" in obj:
            state = State.REJECTED if obj["error"] == "auth" else State.UNKNOWN
            return failed(state, AUTH if obj["error"] == "auth" else LOCAL_FAILED, str(obj.get("detail")))
        res = obj["result"]
        got = {k: res.get(k) for k in ("task", "task_error") if isinstance(res.get(k), dict)}
        outcome = Outcome.from_dict(res["outcome"])
        return RemoteResult(outcome, str(res["to"]), res.get("agent_id"), res.get("no_agent"), **got)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return failed(State.UNKNOWN, LOCAL_FAILED, f"the relay process answered a bad line: {exc}")


_KEPT: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, KeptConnections]] = weakref.WeakKeyDictionary()


def _kept(path: Path) -> KeptConnections:
    """This loop's connections to the relay process's socket at `path` (a shim has one loop: one set per shim)."""
    for gone in [loop for loop in _KEPT if loop.is_closed()]:  # a loop closed without close_kept (a test's run)
        del _KEPT[gone]
    per_loop = _KEPT.setdefault(asyncio.get_running_loop(), {})
    conns = per_loop.get(str(path))
    if conns is None:
        conns = per_loop[str(path)] = KeptConnections(str(path), b"")  # the proof rides each request: no key line
    return conns


async def close_kept() -> None:
    """Close this loop's kept connections to relay processes (a shim's, at its exit)."""
    per_loop = _KEPT.pop(asyncio.get_running_loop(), {})
    for conns in per_loop.values():
        await conns.close()
