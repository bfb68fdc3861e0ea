"""The operations an adapter that plays its session's model (the fake) answers with (harness.base.SessionOps)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec

from crosstalk.core.errors import CrosstalkError
from crosstalk.core.tasks import Artifact
from crosstalk.harness.base import SessionOps
from crosstalk.tasks.service import TaskService

log = logging.getLogger("crosstalk.agent")
P = ParamSpec("P")


def session_ops(tasks: TaskService, via: Callable[[str, str], Awaitable[object]] | None) -> SessionOps:
    """Answers go through the agent's task service; a plain answer through `via` when given (the shim's reply
    tool, which also carries the answer into the asker's session)."""

    async def answer(message_id: str, text: str) -> object:
        return await (via(message_id, text) if via is not None else tasks.reply(message_id, text))

    async def reply(message_id: str, text: str, artifacts: tuple[Artifact, ...], direct: bool) -> object:
        return await tasks.reply(message_id, text, artifacts=artifacts, direct=direct)

    return SessionOps(
        answer=_logging_refusals(answer, "scripted answer to"),
        reply=_logging_refusals(reply, "conformance answer to"),
        expect_answer=tasks.expect_answer,
        require_input=_logging_refusals(tasks.require_input, "conformance input request for"),
    )


def _logging_refusals(op: Callable[P, Awaitable[object]], what: str) -> Callable[P, Awaitable[object]]:
    """A task operation a scripted session calls as its answer: a refusal (the task moved on) is logged, never
    raised into the adapter."""

    async def call(*args: P.args, **kwargs: P.kwargs) -> object:
        try:
            return await op(*args, **kwargs)
        except CrosstalkError as exc:
            log.warning("%s %s refused: %s", what, args[0] if args else "?", exc)
            return None

    return call
