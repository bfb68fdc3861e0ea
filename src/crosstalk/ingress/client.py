"""Sending to a live agent by name or agent_id: resolve its descriptor, read its key, deliver over its socket.

Used by `crosstalk send`, the demo and agents themselves. No asyncio here: the CLI's start-up cost matters.
"""

from __future__ import annotations

from crosstalk.core.message import Message
from crosstalk.core.record import Record
from crosstalk.core.states import Outcome
from crosstalk.ingress.errors import A2ARefused, AgentUnreachable, WireError
from crosstalk.ingress.uds_client import DEFAULT_TIMEOUT_S, deliver
from crosstalk.registry.credentials import read_key
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import resolve
from crosstalk.registry.errors import KeyFileError
from crosstalk.registry.paths import StatePaths

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from crosstalk.core.tasks import TaskView
    from crosstalk.harness.base import InjectResult


class SendResult(Record):
    _fields = ("target", "outcome")
    __slots__ = _fields
    target: Descriptor
    outcome: Outcome

    def __init__(self, target: Descriptor, outcome: Outcome) -> None:
        self._set(target, outcome)


def send(paths: StatePaths, msg: Message, *, timeout: float = DEFAULT_TIMEOUT_S) -> SendResult:
    """Deliver `msg` to the live agent named by `msg.to`. Raises NoSuchAgent, AmbiguousName, AgentUnreachable
    or WireError; every other answer (accepted, queued, rejected, …) comes back as the outcome."""
    return send_to(paths, resolve(paths, msg.to), msg, timeout=timeout)


def send_to(paths: StatePaths, target: Descriptor, msg: Message, *, timeout: float = DEFAULT_TIMEOUT_S) -> SendResult:
    """Deliver `msg` to the live agent `target` (already resolved). Raises AgentUnreachable or WireError."""
    try:
        token = read_key(paths.key_file(target.agent_id))
    except KeyFileError as exc:
        raise AgentUnreachable(f"agent {target.name!r} has no usable key: {exc}") from None
    return SendResult(target, deliver(target.uds_path, token, msg, timeout=timeout))


class A2ASendResult(Record):
    _fields = ("target", "sender", "task")
    __slots__ = _fields
    target: Descriptor
    sender: Descriptor
    task: TaskView

    def __init__(self, target: Descriptor, sender: Descriptor, task: TaskView) -> None:
        self._set(target, sender, task)


def send_a2a(
    paths: StatePaths,
    msg: Message,
    *,
    as_agent: str,
    return_immediately: bool = False,
    task_id: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> A2ASendResult:
    """Send over A2A as the live agent `as_agent`, whose bearer token names it as the sender. The receiver answers
    with the task: completed (delivered or replied), failed, or still working (an unknown outcome, an open ask).
    Raises NoSuchAgent/AmbiguousName, AgentUnreachable, or crosstalk.core.tasks.TaskError."""
    import asyncio

    from crosstalk.ingress.a2a.client import A2AClient

    target = resolve(paths, msg.to)
    sender = resolve(paths, as_agent)
    url = target.a2a_url
    if not url:
        raise AgentUnreachable(f"agent {target.name!r} serves no A2A endpoint")
    try:
        token = read_key(paths.token_path(sender.agent_id))
    except KeyFileError as exc:
        raise AgentUnreachable(f"agent {sender.name!r} has no usable bearer token: {exc}") from None

    from crosstalk.ingress.errors import A2AAuthError, A2AOutcomeUnknown, A2AProtocolError, A2AUnreachable

    async def run() -> TaskView:
        async with A2AClient(url, token, timeout=timeout) as client:
            return await client.send(msg, task_id=task_id, return_immediately=return_immediately)

    try:
        task = asyncio.run(run())
    except A2AOutcomeUnknown as exc:
        raise WireError(
            f"no answer from {target.name} ({exc}); the message may have arrived: resend it with the "
            "same message_id and the receiver answers from its journal"
        ) from None
    except A2AUnreachable as exc:
        raise AgentUnreachable(f"cannot reach {target.name} over A2A: {exc}") from None
    except A2AAuthError as exc:
        raise A2ARefused(f"{target.name} refused {sender.name}'s token: {exc}") from None
    except A2AProtocolError as exc:
        raise WireError(f"{target.name} answered with an A2A error: {exc}") from None
    return A2ASendResult(target, sender, task)


def native_targets(paths: StatePaths, to: str, environ: Mapping[str, str]) -> list[tuple[Any, Any]]:
    """The live sessions named `to` that crosstalk does not serve (a Claude session started without it), each as
    (its harness kind, its session row)."""
    from crosstalk import harness as kinds
    from crosstalk.registry.discovery import list_descriptors, recorded_endpoints

    descs = list_descriptors(paths)
    served = {(d.harness, d.session_ref) for d in descs}
    native = kinds.native_sessions(to, environ, recorded_endpoints(descs))
    return [(k, row) for k, row in native if (row.harness, row.session_ref) not in served]


def deliver_native(
    paths: StatePaths,
    to: str,
    text: str,
    found: list[tuple[Any, Any]],
    *,
    kind: str,
    from_name: str,
    sender_pid: int | None,
    environ: Mapping[str, str],
    message_id: str | None = None,
    on_settled: Callable[[str, InjectResult], None] | None = None,
) -> Outcome:
    """A message to the live session named `to` that crosstalk does not serve (`found`: what `native_targets`
    found, at least one), written as the harness's own peers write it. Held: `on_settled` gets the final word later
    (harness.base.NativeDelivery). The answer's evidence says it went natively, and why a refusal was (`hint`)."""
    from crosstalk.core.states import Reason, State
    from crosstalk.registry.discovery import list_descriptors

    if len(found) > 1:
        return Outcome("", State.UNKNOWN, Reason.AMBIGUOUS_NAME, {"hint": f"several sessions are named {to!r}"})
    if kind != "inform":
        hint = f"{to} runs without crosstalk: it takes informs only, and cannot answer an ask or take a command"
        return Outcome("", State.REJECTED, "kind:native_inform_only", {"native": True, "hint": hint})
    harness, row = found[0]
    if row.endpoint and _crosstalk_socket(paths, list_descriptors(paths), row.endpoint):
        # A session record (planted, or stale) naming an agent's own socket: a native write there would be taken by
        # no session, and journaled by no agent. Crosstalk agents are reached by name through their descriptors.
        hint = f"{to}'s session record names a crosstalk agent's socket ({row.endpoint}), not a session's own"
        return Outcome("", State.REJECTED, "native:crosstalk_socket", {"native": True, "hint": hint})
    out = harness.deliver_native(
        row, text, from_name=from_name, sender_pid=sender_pid, environ=environ, message_id=message_id,
        on_settled=on_settled,
    )  # fmt: skip
    written = out.evidence.get("msg_id")
    evidence = {**out.evidence, "native": True}
    return Outcome(written if isinstance(written, str) else "", out.state, out.reason or None, evidence)


def _crosstalk_socket(paths: StatePaths, descs: list[Descriptor], endpoint: str) -> bool:
    """Whether `endpoint` is a crosstalk agent's own socket: a path under the state root, or one a live descriptor
    names (compared after resolving symlinks)."""
    import os

    real = os.path.realpath(endpoint)
    root = os.path.realpath(paths.root)
    if real == root or real.startswith(root + os.sep):
        return True
    return any(real == os.path.realpath(d.uds_path) for d in descs)
