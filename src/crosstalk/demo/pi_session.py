"""A live pi session for `crosstalk demo`: the real `pi --mode rpc` (prompts on stdin, events on stdout), crosstalk
set up the way a user does (`crosstalk install pi`, enabled with PI_CROSSTALK=1 and a handle), its model a scripted
Chat Completions server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from crosstalk.core import untrusted
from crosstalk.demo.harnesses import Harnesses, install_crosstalk, session_env
from crosstalk.demo.models import RecordedRequest, ScriptedChat
from crosstalk.demo.models.wiring import MODEL, write_pi_models
from crosstalk.demo.procs import Procs
from crosstalk.demo.session import HarnessSession
from crosstalk.harness.codex.appserver import MAX_FRAME


class PiSession(HarnessSession):
    title = "pi"
    harness = "pi"
    tool_prefix = ""

    def __init__(self, root: Path, harnesses: Harnesses, crosstalk_home: Path, procs: Procs, handle: str) -> None:
        self.root = root
        self.cwd = root / "work"
        agent_dir = root / "home" / ".pi" / "agent"
        for d in (self.cwd, agent_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.model = ScriptedChat().start()
        write_pi_models(agent_dir, self.model.base_url)
        self.env = session_env(
            root,
            harnesses,
            crosstalk_home,
            PI_CODING_AGENT_DIR=str(agent_dir),
            PI_OFFLINE="1",
            PI_TELEMETRY="0",
            PI_CROSSTALK="1",
            PI_CROSSTALK_HANDLE=handle,
        )
        install_crosstalk("pi", self.env, self.cwd)
        argv = [str(harnesses.bins["pi"]), "--mode", "rpc", "--provider", "scripted", "--model", MODEL]
        with open(root / "pi.err", "wb") as err:
            self.proc = procs.spawn(
                argv, env=self.env, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
            )
        self.pid = self.proc.pid
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, name="demo-pi-events", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for raw in self.proc.stdout:
                with contextlib.suppress(ValueError):  # UntrustedInput: a line that is not JSON or nests too deeply
                    self.events.append(untrusted.loads(raw, what="a pi RPC event", max_bytes=MAX_FRAME))

    def say(self, text: str) -> None:
        """One user prompt (an RPC command on stdin)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps({"type": "prompt", "message": text}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self.exited() from None

    def tool_result(self, req: RecordedRequest, tool: str) -> dict[str, Any] | None:
        return None  # the demo reads pi's tool results from crosstalk, not from its model's input
