"""The sending side of the socket's task frames (task_frames.py): one crosstalk agent's tasks at another, by its
unix socket. The same calls and the same errors as the A2A client (a2a/client.py) for the two operations a session
needs, `send` and `get`, without the A2A SDK or an HTTP stack: asyncio streams, one connection per request or
connections kept per peer (uds_kept.py).

Errors, as A2AClient raises them: TaskError for task-level errors, A2AAuthError for a refused key or token,
A2AUnreachable when nothing was sent (no socket, connection refused), A2AOutcomeUnknown when the request left and
no answer came back, A2AProtocolError for anything else the agent answered, and TaskFramesUnsupported when the
agent predates task frames (the caller may use A2A instead: nothing was received).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from crosstalk.core import untrusted
from crosstalk.core.message import Message
from crosstalk.core.tasks import TaskView
from crosstalk.ingress.errors import (
    A2AAuthError,
    A2AOutcomeUnknown,
    A2AProtocolError,
    A2AUnreachable,
    KeptBroken,
    KeptUnreachable,
    TaskFramesUnsupported,
)
from crosstalk.ingress.frames import MAX_LINE_BYTES, encode_auth
from crosstalk.ingress.task_frames import (
    AUTH_KIND,
    STOPPED_KIND,
    encode_task_get,
    encode_task_send,
    error_of,
    task_error,
    view_from_dict,
)
from crosstalk.ingress.uds_kept import KeptConnections

DEFAULT_TIMEOUT_S = 60.0
ASK_WAIT_SLACK_S = 15.0  # a default-wait ask returns when answered or past its deadline: wait a little longer
_OLD_AGENT = "frame: unknown frame type 'task'"  # what an agent without task frames answers (nothing received)


class UdsTaskClient:
    """One peer agent reached at its socket `uds_path` with its `key`, sending as the agent whose `bearer` it is.
    `keep`: keep connections to the peer between requests (uds_kept.py; the shim's own clients), closed by close();
    without it, one connection per request."""

    def __init__(
        self, uds_path: str | Path, key: str, bearer: str, *, timeout: float = DEFAULT_TIMEOUT_S, keep: bool = False
    ) -> None:
        self.uds_path = str(uds_path)
        self.timeout = timeout
        self.keep = keep
        self._bearer = bearer
        self.connections = KeptConnections(self.uds_path, encode_auth(key))

    async def send(
        self, message: Message, *, task_id: str | None = None, return_immediately: bool = False, op: str | None = None
    ) -> TaskView:
        """SendMessage as a task frame: the task (or, answered with a direct message, the view A2A would give)."""
        wait = self.timeout
        if not return_immediately and message.deadline_seconds:
            wait = max(wait, message.deadline_seconds + ASK_WAIT_SLACK_S)
        line = encode_task_send(
            self._bearer, message, return_immediately=return_immediately, task_id=task_id, op=op, keep=self.keep
        )
        return await self._call(line, wait, message)

    async def get(self, task_id: str) -> TaskView:
        return await self._call(encode_task_get(self._bearer, task_id, keep=self.keep), self.timeout, None)

    async def close(self) -> None:
        """Close the kept connections (none without `keep`)."""
        await self.connections.close()

    async def _call(self, line: bytes, wait: float, sent: Message | None) -> TaskView:
        if len(line) > MAX_LINE_BYTES:
            raise A2AProtocolError(f"task frame is {len(line)} bytes, over the socket's {MAX_LINE_BYTES}-byte line")
        try:
            if self.keep:
                raw = await self.connections.request(line, wait)
            else:  # a connection of its own: closed after its answer, never retried
                conn = await self.connections.open(kept=False)
                try:
                    raw = await conn.exchange(line, wait)
                finally:
                    await conn.close()
        except KeptUnreachable as exc:
            raise A2AUnreachable(str(exc)) from None
        except KeptBroken as exc:
            raise A2AOutcomeUnknown(f"{self.uds_path}: {exc}") from None
        except asyncio.LimitOverrunError:
            raise A2AProtocolError(f"the answer from {self.uds_path} is over the line limit") from None
        except TimeoutError:
            raise A2AOutcomeUnknown(f"no answer from {self.uds_path} within {wait:.0f} s") from None
        return _read(raw, sent, self.uds_path)


def _read(raw: bytes, sent: Message | None, where: str) -> TaskView:
    return _view_of(_decode(raw, where), sent, where)


def _decode(raw: bytes, where: str) -> dict[str, Any]:
    try:
        data = untrusted.loads(raw, what="the agent's answer", max_bytes=MAX_LINE_BYTES)
    except untrusted.UntrustedInput as exc:
        raise A2AProtocolError(f"the answer from {where} is not JSON: {exc.problem}") from None
    if not isinstance(data, dict):
        raise A2AProtocolError(f"the answer from {where} is not an object")
    return data


def _view_of(data: dict[str, Any], sent: Message | None, where: str) -> TaskView:
    if "task" in data:
        try:
            return view_from_dict(data["task"], sent)
        except (ValueError, KeyError, TypeError) as exc:
            raise A2AProtocolError(f"the task {where} answered is malformed: {exc}") from None
    if "error" in data:
        kind, text = error_of(data)
        if kind == STOPPED_KIND:
            raise A2AOutcomeUnknown(f"{where}: {text}")
        if kind == AUTH_KIND:
            raise A2AAuthError(f"{where} refused the sender: {text}", 401)
        err = task_error(kind, text)
        if err is not None:
            raise err
        raise A2AProtocolError(f"{where}: {text}")
    reason = str(data.get("reason") or "")  # the socket's own refusal line (frames.encode_error_answer)
    if reason.startswith(_OLD_AGENT):
        raise TaskFramesUnsupported(f"{where} does not take task frames")
    if reason.startswith("auth:"):
        raise A2AAuthError(f"{where} refused the key: {reason}", 401)
    raise A2AProtocolError(f"{where} answered {reason or 'without a task'}")
