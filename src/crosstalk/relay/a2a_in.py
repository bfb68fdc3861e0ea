"""The receiving relay process's side of A2A across the relay (docs/dev/relay.md "A2A across the relay"): a task
request for one of this machine's agents goes to that agent's task service as a task frame on its uds socket
(ingress/uds_tasks.py `serve_relayed`), which takes it only from this process, for the sender it labels
`@relay:<machine>/<agent>`. The task lives here, in that agent's journal, as a local sender's does: the same chain,
dedupe, deadline and reply. relay/deliver.py resolves the agent and calls this with its connections."""

from __future__ import annotations

import asyncio
import json

from crosstalk.core.errors import ErrorKind
from crosstalk.ingress.errors import KeptBroken, KeptUnreachable
from crosstalk.ingress.task_frames import encode_task_send
from crosstalk.ingress.uds_kept import KeptConnections
from crosstalk.registry.descriptor import Descriptor
from crosstalk.relay.a2a_wire import TaskRequest, encode_task_answer, encode_task_error
from crosstalk.relay.wire import encode_error


async def deliver_task(conns: KeptConnections, target: Descriptor, req: TaskRequest, timeout: float) -> bytes:
    """The answer frame for one task request to `target` (`conns`: its socket, the key line first): the task, the
    task service's refusal, or why it never got there. A connection of its own, closed after the answer: a task
    frame never rides the agent's kept message connections."""
    msg = req.message
    line = json.loads(encode_task_send("-", msg, return_immediately=req.return_immediately, task_id=req.task_id))
    line["relay_from"] = msg.from_  # the bearer is unused: the socket proves this process (ingress/relay_peer.py)
    try:
        conn = await conns.open(kept=False)
    except KeptUnreachable as exc:
        return encode_error("unreachable", f"agent {target.name!r} is not answering on its socket: {exc}")
    try:
        raw = await conn.exchange(json.dumps(line, ensure_ascii=False).encode() + b"\n", timeout)
    except (KeptBroken, TimeoutError, asyncio.LimitOverrunError) as exc:  # it may have it: resent, dedupe answers
        return encode_error("wire", f"no answer from {target.name}: {exc!r}")
    finally:
        await conn.close()
    try:
        answer = json.loads(raw)
    except ValueError:
        return encode_error("wire", f"{target.name} answered with a line that is not JSON")
    if isinstance(answer, dict) and isinstance(answer.get("task"), dict):
        return encode_task_answer(answer["task"], target.name, target.agent_id)
    err = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(err, dict):  # the task frames' error, or the socket's own refusal (a string)
        kind, text = str(err.get("kind") or ErrorKind.FAILED.value), str(err.get("message") or "")
    else:
        kind, text = ErrorKind.FAILED.value, str(err or "the agent gave no task")
    return encode_task_error(kind, text, target.name, target.agent_id)
