"""Sending to a live agent by name or agent_id: resolve its descriptor, read its key, deliver over its socket.

Used by `crosstalk send`, the demo and agents themselves. No asyncio here: the CLI's start-up cost matters.
"""

from __future__ import annotations

from dataclasses import dataclass

from crosstalk.core.message import Message
from crosstalk.core.states import Outcome
from crosstalk.ingress.uds_client import DEFAULT_TIMEOUT_S, AgentUnreachable, deliver
from crosstalk.registry.credentials import read_key
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import resolve
from crosstalk.registry.errors import KeyFileError
from crosstalk.registry.paths import StatePaths


@dataclass(frozen=True, slots=True)
class SendResult:
    target: Descriptor
    outcome: Outcome


def send(paths: StatePaths, msg: Message, *, timeout: float = DEFAULT_TIMEOUT_S) -> SendResult:
    """Deliver `msg` to the live agent named by `msg.to`. Raises NoSuchAgent, AmbiguousName, AgentUnreachable
    or WireError; every other answer (accepted, queued, rejected, …) comes back as the outcome."""
    target = resolve(paths, msg.to)
    try:
        token = read_key(paths.key_path(target.agent_id))
    except KeyFileError as exc:
        raise AgentUnreachable(f"agent {target.name!r} has no usable key: {exc}") from None
    return SendResult(target, deliver(target.uds_path, token, msg, timeout=timeout))
