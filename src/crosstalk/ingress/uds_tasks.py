"""The socket's task frames, served (task_frames.py has the wire): SendMessage and GetTask without the A2A SDK.

One crosstalk agent sends another a task over the receiver's unix socket: the key line proves the peer runs as this
user; the frame's bearer token names the sending agent, as on A2A (registry/bearer.py); and the peer's SO_PEERCRED
pid must be that agent's own process (its shim, or its harness), which A2A cannot check. The message then goes to
the same TaskApi the A2A edge calls (tasks/service.py), with the same verified Sender: bounce, dedupe, policy,
admission and the journal (fsync before any answer) run exactly as for a SendMessage, and the answer is the task.
Claim and release requests (`op`) go to the same op handler the A2A edge uses (agent/claims.py).

A frame with `"keep": true` keeps the connection for the next one (served by uds_keeping.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from crosstalk.core.errors import MessageError, TaskError
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.tasks import TaskApi, TaskView
from crosstalk.fs import trace
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.ingress import uds_keeping as keeping
from crosstalk.ingress.frames import TaskLine
from crosstalk.ingress.relay_peer import names_relayed_agent
from crosstalk.ingress.task_frames import (
    AUTH_KIND,
    OPS,
    PROTOCOL_KIND,
    STOPPED_KIND,
    encode_error,
    encode_view,
    message_of,
)
from crosstalk.policy.transport import RELAY_TRANSPORT
from crosstalk.registry.descriptor import Descriptor

log = logging.getLogger(__name__)

STOPPED_TEXT = "the agent stopped while it took this frame: the message may be kept, and delivered once it is back"
TRANSPORT = "uds"  # the Sender's transport: how its identity was proven (the message itself travels as a task)
OpHandler = Callable[[str, Sender, Message], Awaitable[tuple[TaskView, dict[str, Any]]]]


@dataclass(slots=True)
class TaskDesk:
    """What an agent's socket needs to serve task frames: its task service, the bearer lookup, and its op handler."""

    tasks: TaskApi
    lookup: Callable[[str], Descriptor | None]  # a bearer token → the live agent it names (BearerDirectory.lookup)
    ops: OpHandler | None = None
    # Whether a peer pid is this machine's relay process (ingress/relay_peer.py), the one that may bring a task for
    # another machine's agent (`relay_from`); set by the socket that serves this desk (ingress/uds.py).
    relay_peer: Callable[[int], bool] | None = None


async def serve_kept(
    desk: TaskDesk,
    line: TaskLine,
    pid: int,
    to: str,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    idle: keeping.IdleKept | None = None,
) -> bytes | None:
    """Task frames on one authenticated connection, `line` first, while each asks to keep it (uds_keeping.py): the
    last answer is returned for the caller to write before it closes, None when the peer closed or went idle."""
    started = proc_start_time(pid)  # the peer is fixed when it connects: read once per connection

    async def answer(frame: TaskLine) -> bytes:
        try:
            return await serve_task(desk, frame, pid, to, started=started)
        except asyncio.CancelledError:
            if keeping.cancelled_here():  # the agent is closing under a frame it read: say so first
                writer.write(encode_error(STOPPED_KIND, STOPPED_TEXT))
            raise

    return await keeping.serve_kept(line, answer, reader, writer, idle)


async def serve_task(desk: TaskDesk, line: TaskLine, pid: int, to: str, *, started: str | None = None) -> bytes:
    """Answer one task frame from peer `pid` to the agent named `to`: the encoded task, or an error line.
    `started`: the peer's start time, when the caller read it already."""
    trace.mark("frame_in")
    if "relay_from" in line.params:
        return await serve_relayed(desk, line, pid, to)
    desc = desk.lookup(line.bearer)
    if desc is None:
        return encode_error(AUTH_KIND, "the bearer token names no live agent")
    if started is None:
        started = proc_start_time(pid)
    if started is None or not desc.served_by(pid, started):
        return encode_error(AUTH_KIND, f"the peer process is not {desc.name}'s own: its token is not usable here")
    sender = Sender(SenderClass.VERIFIED, desc.agent_id, desc.name, TRANSPORT)
    params = line.params
    try:
        if line.method == "get":
            task_id = params.get("task_id")
            if not isinstance(task_id, str) or not task_id:
                return encode_error(TaskError.INVALID_PARAMS.value, "task_id: a non-empty string is required")
            return encode_view(await desk.tasks.get(desc.agent_id, task_id))
        message = message_of(params, to=to, sender_name=sender.name)
        op = params.get("op")
        if op is not None:
            if op not in OPS:
                return encode_error(TaskError.INVALID_PARAMS.value, f"op: must be one of {', '.join(OPS)}")
            if desk.ops is None:
                return encode_error(TaskError.UNSUPPORTED.value, f"this agent does not serve op {op}")
            view, _extra = await desk.ops(str(op), sender, message)
            return encode_view(view)
        view = await desk.tasks.send(
            sender, message, task_id=message.task_id, return_immediately=params.get("return_immediately") is True
        )
        return encode_view(view)
    except TaskError as exc:
        return encode_error(exc.code.value, exc.message)
    except MessageError as exc:
        return encode_error(TaskError.INVALID_PARAMS.value, f"message.{exc.field}: {exc.problem}")
    except Exception:
        # Its text may hold paths or internals: to the log, not to the peer (as the A2A edge does).
        log.exception("task frame %s failed in the task service", line.method)
        return encode_error(PROTOCOL_KIND, f"{line.method} failed inside the agent")


async def serve_relayed(desk: TaskDesk, line: TaskLine, pid: int, to: str) -> bytes:
    """A task another machine's agent sends (A2A across the relay, docs/dev/relay.md): only this machine's relay
    process may bring one (its bearer is unused: the peer is proven as that process, as for a `@relay:` tag on a
    plain frame), for `relay_from` = `@relay:ALIAS/NAME`, the label that process gave the sending machine's agent.
    The task is that external sender's (tasks/owners.py), judged on the relay transport: an ask passes, a command
    never. A send only; the answer is the task, as for a local sender."""
    claimed = line.params.get("relay_from")
    if desk.relay_peer is None or not desk.relay_peer(pid):
        return encode_error(AUTH_KIND, "only this machine's relay process may bring another machine's task")
    if line.method != "send" or line.params.get("op") is not None or not names_relayed_agent(claimed):
        return encode_error(TaskError.INVALID_PARAMS.value, "relay_from: @relay:ALIAS/NAME, on a send without op")
    sender = Sender(SenderClass.EXTERNAL, None, str(claimed), RELAY_TRANSPORT)
    try:
        message = message_of(line.params, to=to, sender_name=sender.name)
        if message.from_ != sender.name:
            return encode_error(TaskError.INVALID_PARAMS.value, "message.from: must be relay_from")
        immediately = line.params.get("return_immediately") is True
        return encode_view(await desk.tasks.send(sender, message, task_id=message.task_id,
                                                 return_immediately=immediately))  # fmt: skip
    except TaskError as exc:
        return encode_error(exc.code.value, exc.message)
    except MessageError as exc:
        return encode_error(TaskError.INVALID_PARAMS.value, f"message.{exc.field}: {exc.problem}")
    except Exception:
        log.exception("a relayed task frame failed in the task service")
        return encode_error(PROTOCOL_KIND, "send failed inside the agent")
