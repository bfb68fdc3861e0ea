"""A TUI session of the demo on a pseudo-terminal the demo holds (Qwen Code, Gemini CLI): its first prompt is given
on the command line, what it draws is read and dropped (a full pty would stall it; the last of it is kept to see
typed text echoed), and what its user types next is written to it, as a person at the keyboard would."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import struct
import termios
import threading
from pathlib import Path

from crosstalk.demo.procs import Procs
from crosstalk.demo.session import HarnessSession

ROWS, COLS = 45, 160
TYPED_TIMEOUT_S = 30.0
ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]")  # CSI and short sequences


class PtySession(HarnessSession):
    pid: int

    def spawn_on_pty(self, argv: list[str], env: dict[str, str], cwd: Path, procs: Procs) -> None:
        """Start `argv` with the pty as its terminal (stderr to <root>/<harness>.err) and drain what it draws."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self._master = master
        self._drawn = 0  # bytes the TUI wrote so far
        self._tail = b""  # the last of them (to see typed text echoed)
        self._cond = threading.Condition()
        try:
            with open(self.root / f"{self.harness}.err", "wb") as err:
                self.proc = procs.spawn(argv, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=err)
        finally:
            os.close(slave)
        self.pid = self.proc.pid
        threading.Thread(target=self._drain, name=f"demo-{self.harness}-pty", daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # the session ended (EIO) or the demo closed the pty
                return
            if not chunk:
                return
            with self._cond:
                self._drawn += len(chunk)
                self._tail = (self._tail + chunk)[-8192:]
                self._cond.notify_all()

    def shows(self, needle: bytes) -> bool:
        """Whether what the TUI drew last holds `needle`, its escape codes (colours, cursor moves) left out. Call
        with `self._cond` held."""
        return needle in ESCAPES.sub(b"", self._tail)

    def type_text(self, text: str) -> None:
        """Type `text` (no Enter) and return once the TUI echoed its end: it read the keys."""
        end = text.split()[-1][-12:].encode() if text.split() else b""
        with self._cond:
            self._tail = b""
        try:
            os.write(self._master, text.encode())
        except OSError:
            raise self.exited() from None
        with self._cond:
            if not self._cond.wait_for(lambda: self.shows(end) or not self.alive(), TYPED_TIMEOUT_S):
                raise RuntimeError(f"the {self.title} TUI never showed the typed text")
        if not self.alive():
            raise self.exited()

    def press_enter(self) -> None:
        try:
            os.write(self._master, b"\r")
        except OSError:
            raise self.exited() from None

    def close(self, procs: Procs) -> None:
        """Its process group ended (a TUI does not end on a closed input), then the pty, then its model server."""
        procs.stop(self.proc)
        with contextlib.suppress(OSError):
            os.close(self._master)
        self.model.stop()
