"""The relay process's local socket (relay/local.sock, 0600 in the 0700 relay dir): how an agent's tool send
(`send_message`, `ask`, `reply` to NAME@ALIAS) crosses the relay without a NATS client or the machine's NATS
credentials in any shim. One JSON line each way per connection:

    → {"v": 1, "token": BEARER, "message": Message.to_dict(), "timeout": SECONDS, "task"?: {…}}
    ← {"v": 1, "result": {"outcome": …, "to": "NAME@ALIAS", "agent_id": ID|null, "no_agent": TEXT|null,
                          "task": VIEW|null, "task_error": {"kind", "message"}|null}}
    ← {"v": 1, "error": "auth"|"bad_frame", "detail": TEXT}

The sender proves its agent as task frames do (ingress/uds_tasks.py): the bearer token names a live agent
(registry/bearer.py) and the peer process (SO_PEERCRED pid and its start time) is that agent's own shim or harness;
an A2A task request (`"task": {"return_immediately", "task_id"}`: `crosstalk send --a2a --as AGENT NAME@ALIAS`,
relay/a2a_out.py) takes the proof the agent's A2A endpoint takes, its bearer token alone.
The relay process then sends the message with `from` = that agent's name, the only word the receiving machine takes
for who sent it (relay/wire.py sender_label: `@relay:<this machine>/<name>`). A unix socket under the state root is
not a new port: nothing listens on the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from crosstalk.core.errors import MessageError
from crosstalk.core.message import Message
from crosstalk.core.states import Outcome, State
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.a2a_wire import task_params
from crosstalk.relay.config import relay_dir
from crosstalk.relay.link import Link
from crosstalk.relay.send import RemoteResult, request_on
from crosstalk.relay.wire import MAX_FRAME_BYTES, split_remote

VERSION = 1
LINE_LIMIT = MAX_FRAME_BYTES + 4096  # a frame's message plus the token and the envelope
READ_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 120.0
NOT_SERVING = "relay:not_serving"
LOCAL_FAILED = "relay:local_failed"
AUTH = "relay:sender_refused"


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
        try:
            answer = await self._serve(reader, writer)
            writer.write(answer)
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the sender went away or sent no whole line: nothing was sent for it
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        from crosstalk.fs.procinfo import proc_start_time
        from crosstalk.ingress.uds import peer_credentials

        pid, uid = peer_credentials(writer.get_extra_info("socket"))
        if uid != os.getuid():
            return _line({"error": "auth", "detail": "the peer runs as another user"})
        raw = await asyncio.wait_for(reader.readuntil(b"\n"), READ_TIMEOUT_S)
        try:
            obj = json.loads(raw.decode("utf-8"))
            token, data, timeout = obj["token"], obj["message"], float(obj.get("timeout") or 60.0)
            task = obj.get("task")
            if obj.get("v") != VERSION or not isinstance(token, str) or not isinstance(data, dict):
                raise ValueError("expected {v: 1, token, message}")
            task = None if task is None else task_params(task)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            return _line({"error": "bad_frame", "detail": f"not a local relay request: {exc}"})
        desc = self.bearers.lookup(token)  # cached (a stat per lookup); files are reread only when the registry changed
        if desc is None:
            return _line({"error": "auth", "detail": "the bearer token names no live agent of this machine"})
        started = proc_start_time(pid)
        if task is None and (started is None or not desc.served_by(pid, started)):
            return _line({"error": "auth", "detail": f"the peer process is not {desc.name}'s own"})
        try:
            msg = Message.from_dict({**data, "from": desc.name})  # who sent it: the proof's agent, never the frame's
        except MessageError as exc:
            return _line({"error": "bad_frame", "detail": f"invalid message: {exc}"})
        if split_remote(msg.to) is None:
            return _line({"error": "bad_frame", "detail": f"{msg.to!r} is not a NAME@ALIAS address"})
        result = await request_on(self.link, msg, timeout=min(max(timeout, 0.1), MAX_TIMEOUT_S), task=task)
        out = {"outcome": result.outcome.to_dict(), "to": result.to, "agent_id": result.agent_id}
        out.update(no_agent=result.no_agent, task=result.task, task_error=result.task_error)
        return _line({"result": out})


async def send_via_local_relay(
    paths: StatePaths, token: str, msg: Message, *, timeout: float, task: dict[str, Any] | None = None
) -> RemoteResult:
    """An agent's send to NAME@ALIAS through this machine's relay process (`token`: the agent's bearer token).
    Bounded: `timeout` for the remote answer plus the local socket's own."""

    def failed(state: State, reason: str, detail: str) -> RemoteResult:
        return RemoteResult(Outcome(msg.message_id, state, reason, {"detail": detail, "relay": True}), msg.to)

    path = local_socket_path(paths)
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(path), limit=LINE_LIMIT), READ_TIMEOUT_S
        )
    except (FileNotFoundError, ConnectionRefusedError):
        detail = "no relay process serves this machine: start `crosstalk relay serve`"
        return failed(State.UNREACHABLE, NOT_SERVING, detail)
    except (OSError, TimeoutError) as exc:
        return failed(State.UNREACHABLE, NOT_SERVING, f"the relay process's socket {path}: {exc}")
    try:
        extra = {} if task is None else {"task": task}
        writer.write(_line({"token": token, "message": msg.to_dict(), "timeout": timeout, **extra}))
        await writer.drain()
        raw = await asyncio.wait_for(reader.readuntil(b"\n"), timeout + READ_TIMEOUT_S)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        hint = f"resend it with the same message_id ({msg.message_id}): the receiver answers from its journal"
        return failed(State.UNKNOWN, LOCAL_FAILED, f"the relay process did not answer ({exc!r}); {hint}")
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 1)
    try:
        obj = json.loads(raw.decode("utf-8"))
        if "error" in obj:
            state = State.REJECTED if obj["error"] == "auth" else State.UNKNOWN
            return failed(state, AUTH if obj["error"] == "auth" else LOCAL_FAILED, str(obj.get("detail")))
        res = obj["result"]
        got = {k: res.get(k) for k in ("task", "task_error") if isinstance(res.get(k), dict)}
        outcome = Outcome.from_dict(res["outcome"])
        return RemoteResult(outcome, str(res["to"]), res.get("agent_id"), res.get("no_agent"), **got)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return failed(State.UNKNOWN, LOCAL_FAILED, f"the relay process answered a bad line: {exc}")
