"""What the demo's three live sessions share: a harness process started by Procs (its stderr in
<root>/<harness>.err), a scripted model server, and how each says it died."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any

from crosstalk.demo.procs import Procs


class HarnessSession:
    harness: str
    title: str  # as a person names it: "Claude Code", "Codex", "pi"
    side_requests = False  # whether its harness also asks its model things of its own, without tools
    root: Path
    proc: subprocess.Popen[bytes]
    model: Any  # its ScriptedModelServer

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        return (self.root / f"{self.harness}.err").read_text(errors="replace")[-1500:]

    def exited(self) -> RuntimeError:
        """The error for a session whose process is gone: the last line it wrote on stderr."""
        last = next((line for line in reversed(self.tail().splitlines()) if line.strip()), "no output")
        return RuntimeError(f"the {self.title} session exited: {last.strip()}")

    def close(self, procs: Procs) -> None:
        """Stdin closed ends the session; then its process group; then its model server."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        procs.stop(self.proc)
        self.model.stop()
