"""The demo's pseudo-terminal sessions (Qwen Code's and Gemini CLI's TUIs): typed text counts as read once the
program echoed it, whatever escape codes it drew around it; the session's process group goes on close."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crosstalk.demo.procs import Procs
from crosstalk.demo.pty_session import ESCAPES, PtySession


class Stub:
    def stop(self) -> None:
        pass


class Echo(PtySession):
    title = "echo"
    harness = "echo"

    def __init__(self, root: Path, procs: Procs, program: str) -> None:
        self.root = root
        self.model: Any = Stub()
        self.spawn_on_pty(["/bin/sh", "-c", program], {"PATH": "/usr/bin:/bin"}, root, procs)


def test_typed_text_is_seen_through_the_escape_codes_and_the_session_ends_on_close(tmp_path: Path):
    procs = Procs(f"CROSSTALK_HOME={tmp_path}")
    # a "TUI" that draws its prompt with colours and a cursor (the terminal echoes what is typed), then reads lines
    session = Echo(tmp_path, procs, r"printf '\033[7mT\033[27m\033[90mype here\033[39m'; while read -r l; do :; done")
    try:
        with session._cond:
            assert session._cond.wait_for(lambda: session.shows(b"Type here"), 10)
        session.type_text("hello world")
        session.press_enter()
        assert session.alive()
    finally:
        session.close(procs)
    assert not session.alive() and procs.close() == []


def test_escapes_are_csi_and_short_sequences():
    assert ESCAPES.sub(b"", b"\x1b[1;31mred\x1b[0m \x1b[?25lhid\x1b(Bden\x1b7") == b"red hidden"
