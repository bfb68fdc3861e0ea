"""What an agent is started with."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from crosstalk.harness.base import HarnessAdapter
from crosstalk.journal.window import MAX_SETTLED
from crosstalk.policy import Limits, Role

RETENTION_INTERVAL_S = 3600.0  # how often a running agent applies the 24 h retention rule to its journal
COMPACT_AFTER_BYTES = 2 << 20  # ...and sooner, once its journal grew by this much (bounds a restart's replay)
# How a session's own answer to an ask is given when its adapter plays the model (the fake): (the AgentHost,
# message_id, text). The shim passes its reply tool, which also carries the answer into the asker's session.
SessionReply = Callable[[Any, str, str], Awaitable[object]]


@dataclass(slots=True)
class AgentConfig:
    harness: HarnessAdapter
    session_ref: str
    preferred_name: str | None
    cwd: str = field(default_factory=os.getcwd)
    role: Role = Role.PRIMARY
    owner: str | None = None  # agent_id of a parent given at start (a worker launched for an orchestrator)
    peers: tuple[str, ...] = ()
    accept_from: tuple[str, ...] | None = None
    limits: Limits = field(default_factory=Limits)
    harness_pid: int | None = None
    inject_timeout_s: float = 30.0
    retention_interval_s: float = RETENTION_INTERVAL_S
    compact_after_bytes: int = COMPACT_AFTER_BYTES
    max_settled: int = MAX_SETTLED  # settled messages (and terminal tasks, ...) kept in memory (journal/window.py)
    a2a: bool = False  # serve A2A 1.0 on 127.0.0.1 (imports the SDK: ~0.3 s, paid only by agents that use it)
    session_reply: SessionReply | None = None  # default: the task service's reply alone
