"""The pi extension's side of `crosstalk pi-agent`'s pipes, played by a test: starts the core, reads its lines and
answers its delivers."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

CROSSTALK = [sys.executable, "-m", "crosstalk"]
WAIT_S = 20.0


class Extension:
    """Plays the pi extension: starts the core, reads its lines, answers delivers with `answer`."""

    def __init__(self, home: Path, session: str, answer: str = "immediate", **env: str) -> None:
        self.env = {"PATH": os.environ["PATH"], "HOME": str(home), "CROSSTALK_HOME": str(home / "xt"), **env}
        with open(home / f"{session}.err", "wb") as err:  # the child keeps its own descriptor
            self.proc = subprocess.Popen([*CROSSTALK, "pi-agent", "--session", session, "--cwd", str(home)],
                                         env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err)  # fmt: skip
        self.answer = answer
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.delivered: list[dict[str, Any]] = []
        self.seen: list[dict[str, Any]] = []  # every line the core wrote, in order
        self.ids = iter(range(1, 10_000))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.ready = self.wait("ready")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            msg = json.loads(raw)
            if msg.get("t") == "deliver":
                self.delivered.append(msg)
                self.write({"t": "delivered", "ref": msg["ref"], "delivered": self.answer})
            self.seen.append(msg)
            self.lines.put(msg)

    def write(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def wait(self, t: str, **match: Any) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_S
        while True:
            msg = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if msg.get("t") == t and all(msg.get(k) == v for k, v in match.items()):
                return msg

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        rid = next(self.ids)
        self.write({"t": "call", "id": rid, "op": op, "args": args})
        return self.wait("result", id=rid)["result"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.reader.join(10)  # at the core's EOF
        if self.proc.stdout is not None:
            self.proc.stdout.close()
