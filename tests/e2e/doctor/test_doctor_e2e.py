"""`crosstalk doctor` against the real harnesses (pinned Claude Code and Codex, offline against mock model
servers), and once in a real terminal (tmux), asserting on what the screen shows."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.ids import agent_id_for, new_message_id
from crosstalk.registry.credentials import create_key
from crosstalk.registry.descriptor import Descriptor, write_descriptor
from crosstalk.registry.paths import StatePaths
from tests.support.live_claude import LiveClaude, bin_dir
from tests.support.live_codex import LiveCodex
from tests.support.tmux_pane import TmuxPane

CROSSTALK = Path(sys.executable).with_name("crosstalk")
WAIT_S = 60.0


def doctor(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any]]:
    env = {**env, "PATH": f"{bin_dir()}:{CROSSTALK.parent}:/usr/bin:/bin"}
    proc = subprocess.run(
        [str(CROSSTALK), "doctor", "--json", *args], env=env, capture_output=True, text=True, timeout=WAIT_S,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def rows(report: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["check"] == check]


def test_a_live_claude_session_shows_its_tested_version_install_and_messaging(
    live_root: Path, require: Callable[[str], Path]
) -> None:
    for name in ("claude", "codex", "pi", "qwen", "opencode"):
        require(name)
    with LiveClaude.start(live_root / "alpha", crosstalk_home=live_root / "xt") as session:
        deadline = time.monotonic() + WAIT_S
        while not (session.record() or {}).get("messagingSocketPath"):
            assert time.monotonic() < deadline and session.alive(), f"no session record\n{session.tail()}"
            time.sleep(0.05)
        code, report = doctor(session.env)
        clis = {r["text"].split()[0]: r for r in rows(report, "harness-cli")}
        assert clis["claude"]["status"] == "ok" and clis["claude"]["text"].startswith("claude 2.1.332 (tested version)")
        assert clis["codex"]["text"].startswith("codex 0.171.0 (tested version)")
        assert clis["pi"]["text"].startswith("pi 0.73.1 (tested version)")
        assert clis["qwen"]["text"].startswith("qwen 0.24.4 (tested version)")
        assert clis["opencode"]["text"].startswith("opencode 1.18.33 (tested version)")
        [claude_install] = [r for r in rows(report, "installed") if r["text"].startswith("claude:")]
        assert claude_install["status"] == "ok", claude_install
        [messaging] = rows(report, "claude-messaging")
        socks = Path(session.env["XDG_RUNTIME_DIR"]) / "cc-socks"
        assert messaging == {
            "check": "claude-messaging", "status": "ok",
            "text": f"native messaging available (1 live session with sockets; sockets in {socks})",
        }  # fmt: skip
        assert code == 0, [f for f in report["findings"] if f["status"] == "problem"]


def test_a_codex_session_started_with_another_state_root_is_named_with_its_fix(
    live_root: Path, require: Callable[[str], Path]
) -> None:
    require("codex")
    first = live_root / "xt1"
    cx = LiveCodex.start(live_root / "cx", crosstalk_home=first)
    try:
        # The entry is rewritten from a shell with another CROSSTALK_HOME; the running Codex still has the first.
        second = live_root / "xt2"
        env = {**cx.env, "CROSSTALK_HOME": str(second)}
        subprocess.run([str(CROSSTALK), "install", "codex"], env=env, check=True, capture_output=True, timeout=60)
        code, report = doctor(env)
        problems = [r for r in rows(report, "codex-env") if r["status"] == "problem"]
        assert code == 1
        assert problems == [
            {
                "check": "codex-env", "status": "problem",
                "text": f"codex pid {cx.proc.pid} was started with state root {first}, but its crosstalk uses "
                f"{second}: its agent is invisible there",
                "fix": f"CROSSTALK_HOME={first} crosstalk install codex, then restart codex (pid {cx.proc.pid})",
            }
        ]  # fmt: skip
        # Running the fix it names (and keeping the session) makes doctor healthy for that shell.
        subprocess.run([str(CROSSTALK), "install", "codex"], env=cx.env, check=True, capture_output=True, timeout=60)
        code, report = doctor(cx.env)
        assert [r["status"] for r in rows(report, "codex-env")] == ["ok"]
    finally:
        cx.close()


def _tmux_or_fail() -> str:
    tmux = shutil.which("tmux")
    if tmux is None:
        if os.environ.get("CROSSTALK_E2E_REQUIRED") == "1":
            pytest.fail("tmux is not installed (CROSSTALK_E2E_REQUIRED=1)", pytrace=False)
        pytest.skip("tmux is not installed; install it to run crosstalk doctor in a real terminal")
    return tmux


def _stale_agent(paths: StatePaths, pid: int, started_at: str) -> str:
    paths.ensure()
    agent_id = agent_id_for("fake", "ghost")
    desc = Descriptor(
        agent_id=agent_id, name="ghost", harness="fake", pid=pid, started_at=started_at, cwd="/",
        session_ref="ghost", uds_path=str(paths.uds_path(agent_id)), instance_id=new_message_id(),
        registered_at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    write_descriptor(paths, desc)
    create_key(paths.key_path(agent_id))
    return agent_id


def test_doctor_in_a_real_terminal_shows_the_problem_then_fix_makes_it_healthy(live_root: Path) -> None:
    _tmux_or_fail()
    paths = StatePaths(live_root / "xt")
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=WAIT_S)
    agent_id = _stale_agent(paths, proc.pid, "1")  # a reaped process: provably dead
    (live_root / "home").mkdir()
    env = {"PATH": f"{CROSSTALK.parent}:/usr/bin:/bin", "HOME": str(live_root / "home"),
           "CROSSTALK_HOME": str(paths.root), "XDG_RUNTIME_DIR": str(live_root), "TERM": "xterm-256color"}  # fmt: skip
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    script = (
        f"env -i {assigns} crosstalk doctor; echo doctor-exit=$?; "
        f"env -i {assigns} crosstalk doctor --fix; echo fix-exit=$?; sleep 120"
    )
    pane = TmuxPane(f"xtdoc-{uuid.uuid4().hex[:8]}")
    pane.start(f"sh -c {shlex.quote(script)}", str(live_root))
    try:
        deadline = time.monotonic() + WAIT_S
        screen = ""
        while "fix-exit=" not in screen:
            assert time.monotonic() < deadline, f"doctor did not finish in the pane:\n{screen}"
            time.sleep(0.1)
            screen = pane.tmux("capture-pane", "-p", "-J", "-t", pane.name)  # -J: wrapped lines joined
        first, _, second = screen.partition("doctor-exit=")
        assert f"PROBLEM stale agent ghost ({agent_id}), pid {proc.pid}: descriptor, key left" in first
        assert "-> run: crosstalk doctor --fix" in first
        # The notes (a harness not on this terminal's PATH, ...) are the same before and after the fix.
        notes = re.search(r"1 problem \((\d+) notes\)", first)
        assert notes is not None and second.startswith("1"), first
        assert f"removed {paths.descriptor(agent_id)}" in second
        assert "ok      no stale descriptors, sockets or keys (0 live agents)" in second
        assert f"healthy ({notes.group(1)} notes)" in second and "fix-exit=0" in second
    finally:
        with contextlib.suppress(Exception):
            pane.close()
    assert not paths.descriptor(agent_id).exists()
