"""The demo's own agent ("orchestrator"), hosted in the demo's process on a thread of its own, so what it sends is
verified by the receiving socket (SO_PEERCRED), not by a claim."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

from crosstalk.core.message import Message, new_message
from crosstalk.core.states import Outcome

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 30.0
NAME = "orchestrator"


class Orchestrator:
    def __init__(self, state_root: Path) -> None:
        self.root = state_root
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._host: Any = None
        self.agent_id = ""

    def start(self, cwd: Path) -> str:
        from crosstalk.agent import AgentConfig, AgentHost
        from crosstalk.harness.fake import FakeHarness
        from crosstalk.registry.paths import StatePaths

        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="demo-orchestrator", daemon=True)
        self._thread.start()
        config = AgentConfig(
            harness=FakeHarness(inbox=self.root / "orchestrator.inbox.jsonl"),
            session_ref="demo-orchestrator",
            preferred_name=NAME,
            cwd=str(cwd),
        )
        fut = asyncio.run_coroutine_threadsafe(AgentHost.start(StatePaths(self.root), config), loop)
        self._host = fut.result(START_TIMEOUT_S)
        self.agent_id = self._host.agent_id
        return self.agent_id

    def send(self, msg: Message) -> Outcome:
        """Deliver `msg` over the receiver's socket; its outcome (CrosstalkError when it cannot be reached)."""
        from crosstalk.ingress.client import send
        from crosstalk.registry.paths import StatePaths

        return send(StatePaths(self.root), msg, timeout=SEND_TIMEOUT_S).outcome

    def message(self, to: str, text: str, **kw: Any) -> Message:
        return new_message(to, text, from_=NAME, **kw)

    def close(self) -> None:
        if self._host is not None and self._loop is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._host.close(), self._loop).result(STOP_TIMEOUT_S)
            self._host = None
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(STOP_TIMEOUT_S)
            self._loop.close()
            self._loop = None
