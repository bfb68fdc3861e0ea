"""`crosstalk watch` once in a real terminal: a tmux server of its own (`tmux -L`, never the user's) runs it in a
pane; the test reads the pane as a person sees it, sends a message meanwhile, quits with q and checks the exit code.

tmux missing skips this test, and fails it when CROSSTALK_E2E_REQUIRED=1 (as CI sets): a green run never hides it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable

import pytest

from tests.support.procs import CROSSTALK, Procs
from tests.support.watch import line_with

WAIT_S = 30.0
TMUX_TIMEOUT_S = 30.0


def _tmux() -> str:
    path = shutil.which("tmux")
    if path is None:
        if os.environ.get("CROSSTALK_E2E_REQUIRED") == "1":
            pytest.fail("tmux is not installed (CROSSTALK_E2E_REQUIRED=1): apt-get install tmux", pytrace=False)
        pytest.skip("tmux is not installed")
    return path


def _wait(what: str, check: Callable[[], str | None], screen: Callable[[], str]) -> str:
    deadline = time.monotonic() + WAIT_S
    while (found := check()) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {WAIT_S} s; the pane shows:\n{screen()}")
        time.sleep(0.1)
    return found


def test_watch_in_tmux_lists_an_agent_shows_a_message_and_quits_with_q(xt: Procs) -> None:
    tmux = _tmux()
    server = f"xtwatch{os.getpid()}"
    alice = xt.start_agent("alice")
    rc_file = xt.root / "watch.rc"
    env = {k: xt.env[k] for k in ("CROSSTALK_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    # A stale COLUMNS/LINES from the test's own environment would size the screen instead of the pane.
    watch = f"env -u COLUMNS -u LINES {assigns} {shlex.quote(str(CROSSTALK))} watch"
    shell = f"{watch}; echo $? > {shlex.quote(str(rc_file))}; sleep 60"

    def run(*args: str) -> str:
        res = subprocess.run([tmux, "-L", server, *args], capture_output=True, text=True, timeout=TMUX_TIMEOUT_S)
        return res.stdout

    def screen() -> str:
        return run("capture-pane", "-p", "-t", server)

    subprocess.run(
        [tmux, "-L", server, "-f", "/dev/null", "new-session", "-d", "-s", server, "-x", "160", "-y", "45",
         "-c", str(xt.root), shell],
        check=True, timeout=TMUX_TIMEOUT_S,
    )  # fmt: skip
    try:
        row = _wait("alice's row", lambda: line_with(screen(), "alice", "fake", "primary", "yes"), screen)
        assert str(alice.pid) in row
        assert line_with(screen(), "Agents (1 live)")
        res = xt.cli("send", "alice", "hello through tmux")
        assert res.returncode == 0, res.stderr
        msg = _wait("the message", lambda: line_with(screen(), "alice", "accepted", "hello through tmux"), screen)
        assert "(external)" in msg
        run("send-keys", "-t", server, "q")
        code = _wait("watch's exit", lambda: rc_file.read_text().strip() if rc_file.exists() else None, screen)
        assert code == "0"
    finally:
        run("kill-server")
