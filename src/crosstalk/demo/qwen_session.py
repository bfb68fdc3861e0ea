"""A live Qwen Code session for `crosstalk demo`: the real interactive `qwen` (only its TUI registers a session and
listens on an inbox; `qwen -p` does neither, docs/qwen.md) on a pseudo-terminal the demo holds, crosstalk set up the
way a user does (`crosstalk install qwen`), its own HOME, QWEN_HOME and XDG_RUNTIME_DIR, its model a scripted Chat
Completions server on 127.0.0.1. Its first prompt is given on the command line (`-i`), so nothing is typed into the
TUI; what the TUI draws is read and dropped (a full pty would stall it)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import struct
import termios
import threading
from pathlib import Path
from typing import Any

from crosstalk.demo.harnesses import Harnesses, install_crosstalk, session_env
from crosstalk.demo.models import RecordedRequest, ScriptedQwenChat
from crosstalk.demo.models.base import text_parts
from crosstalk.demo.models.wiring import MODEL, write_qwen_settings
from crosstalk.demo.procs import Procs
from crosstalk.demo.session import HarnessSession

TOOL_PREFIX = "mcp__crosstalk__"
ROWS, COLS = 45, 160
TYPED_TIMEOUT_S = 30.0


class QwenSession(HarnessSession):
    title = "Qwen Code"
    harness = "qwen"
    tool_prefix = TOOL_PREFIX

    def __init__(self, root: Path, harnesses: Harnesses, crosstalk_home: Path, procs: Procs, first: str) -> None:
        """`first`: the session's first prompt, scripted to make its model call crosstalk's `list_agents` (the first
        tool call registers the session's crosstalk agent)."""
        self.root = root
        self.cwd = root / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        (root / "run").mkdir(mode=0o700, exist_ok=True)
        self.model = ScriptedQwenChat().start()
        self.model.scripts_by[first] = f"CALL {TOOL_PREFIX}list_agents {{}}"
        qwen_home = root / "home" / ".qwen"
        write_qwen_settings(qwen_home)
        self.env = session_env(
            root,
            harnesses,
            crosstalk_home,
            QWEN_HOME=str(qwen_home),
            XDG_RUNTIME_DIR=str(root / "run"),  # its inbox socket goes under it
            OPENAI_BASE_URL=f"{self.model.base_url}/v1",
            OPENAI_API_KEY="scripted",
            OPENAI_MODEL=MODEL,
            TERM="xterm-256color",  # a TUI: it draws with escape codes, which the demo drops
        )
        install_crosstalk("qwen", self.env, self.cwd)
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self._master = master
        self._drawn = 0  # bytes the TUI wrote so far
        self._tail = b""  # the last of them (to see typed text echoed)
        self._cond = threading.Condition()
        argv = [str(harnesses.bins["qwen"]), "-i", first]
        try:
            with open(root / "qwen.err", "wb") as err:
                self.proc = procs.spawn(argv, env=self.env, cwd=self.cwd, stdin=slave, stdout=slave, stderr=err)
        finally:
            os.close(slave)
        self.pid = self.proc.pid
        threading.Thread(target=self._drain, name="demo-qwen-pty", daemon=True).start()

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

    def say(self, text: str) -> None:
        """Type `text`; once the TUI echoed its end (it read the keys), press Enter (an Enter sent with the text
        would be taken as part of a paste)."""
        end = text.split()[-1][-12:].encode() if text.split() else b""
        with self._cond:
            self._tail = b""
        try:
            os.write(self._master, text.encode())
        except OSError:
            raise self.exited() from None
        with self._cond:
            if not self._cond.wait_for(lambda: end in self._tail or not self.alive(), TYPED_TIMEOUT_S):
                raise RuntimeError("the Qwen Code TUI never showed the typed text")
        if not self.alive():
            raise self.exited()
        os.write(self._master, b"\r")

    def tool_result(self, req: RecordedRequest, tool: str) -> dict[str, Any] | None:
        """The newest result of crosstalk's `tool` this Chat Completions request carries, parsed, or None."""
        name, found = TOOL_PREFIX + tool, None
        msgs = [m for m in req.body.get("messages") or [] if isinstance(m, dict)]
        names = {c.get("id"): c.get("function", {}).get("name") for m in msgs
                 for c in m.get("tool_calls") or [] if isinstance(c, dict)}  # fmt: skip
        for m in msgs:
            if m.get("role") == "tool" and names.get(m.get("tool_call_id")) == name:
                text = text_parts(m.get("content"))
                with contextlib.suppress(ValueError):
                    found = json.JSONDecoder().raw_decode(text[text.find("{") :])[0] if "{" in text else found
        return found if isinstance(found, dict) else None

    def close(self, procs: Procs) -> None:
        """Its process group ended (the TUI does not end on a closed input), then the pty, then its model server."""
        procs.stop(self.proc)
        with contextlib.suppress(OSError):
            os.close(self._master)
        self.model.stop()
