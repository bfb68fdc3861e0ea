"""`crosstalk ARGS...` on a pseudo-terminal, driven as a person would: what it printed, and keys typed into it.
Shared by the chat and workflow compose tests (integration and e2e)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time

from tests.support.bus_machines import Machine

WAIT_S = 60.0


def _controlling_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """`crosstalk ARGS...` on a pseudo-terminal: what it printed, and keys typed into it."""

    def __init__(self, machine: Machine, *args: str, env: dict[str, str] | None = None) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "crosstalk", *args],
            cwd=machine.root,
            env={**machine.env, "TERM": "dumb", **(env or {})},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=_controlling_terminal,  # so Ctrl-C typed into it is SIGINT, as in a real terminal
        )
        os.close(slave)
        self.screen = b""

    def expect(self, needle: str, timeout: float = WAIT_S) -> str:
        deadline = time.monotonic() + timeout
        while needle.encode() not in self.screen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {needle!r}; the screen:\n{self.screen.decode(errors='replace')[-2000:]}"
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:  # the child closed the terminal
                    assert needle.encode() in self.screen, self.screen.decode(errors="replace")[-2000:]
        return self.screen.decode(errors="replace")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def mark(self) -> None:
        self.screen = b""

    def close(self) -> int | None:
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            return None
        finally:
            os.close(self.master)
