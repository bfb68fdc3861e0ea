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

    def say(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)
        time.sleep(0.3)  # let the program take the text before Enter submits it
        self.tmux("send-keys", "-t", self.name, "Enter")

    def close(self) -> None:
        self.tmux("kill-server")
