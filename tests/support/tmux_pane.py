"""A terminal program in a detached tmux server of its own (`tmux -L <name>`: no user server is used): keys typed
with send-keys, the screen read with capture-pane, the whole server killed on close."""

from __future__ import annotations

import subprocess
import time


class TmuxPane:
    def __init__(self, name: str) -> None:
        self.name = name

    def start(self, cmd: str, cwd: str) -> None:
        subprocess.run(
            ["tmux", "-L", self.name, "new-session", "-d", "-s", self.name, "-x", "160", "-y", "45", "-c", cwd, cmd],
            check=True, timeout=30,
        )  # fmt: skip

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.name, *args], capture_output=True, text=True, timeout=30).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def say(self, text: str, timeout: float = 30.0) -> None:
        """Type `text`, and once the program shows it (it has read the keys and ended any paste it saw), press
        Enter: an Enter that arrived with the text would be taken as part of a paste, not as submit."""
        tail = "".join(text.split())[-24:]
        before = self._shown(tail)
        self.tmux("send-keys", "-t", self.name, "-l", text)
        deadline = time.monotonic() + timeout
        while self._shown(tail) <= before:
            assert time.monotonic() < deadline, f"the program never showed the typed text\n{self.screen()}"
            time.sleep(0.02)
        self.tmux("send-keys", "-t", self.name, "Enter")

    def _shown(self, tail: str) -> int:
        """How often the screen shows `tail` (whitespace and line wraps ignored) or a paste placeholder."""
        screen = self.screen()
        return "".join(screen.split()).count(tail) + screen.count("[Pasted text")

    def close(self) -> None:
        self.tmux("kill-server")
