"""A live Gemini CLI 0.61.0 session for the e2e tests: the interactive TUI in a tmux server of its own
(tests/support/tmux_pane.py), against the Gemini API mock (crosstalk/demo/models/gemini.py) through
`GOOGLE_GEMINI_BASE_URL` with `gemini-api-key` auth (docs/dev/gemini-adapter.md: the only connection it makes is to
the mock), with crosstalk set up the README's way (`crosstalk install gemini`). Its own HOME, TMPDIR, cwd and
crosstalk run dir under `root`.

    with LiveGemini.start(root / "g", crosstalk_home=root / "xt") as g:
        g.say("CALL mcp_crosstalk_list_agents {}")
        g.wait_tool_result("list_agents")
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from crosstalk.demo.models import RecordedRequest
from crosstalk.demo.models.gemini import ScriptedGemini
from crosstalk.demo.models.wiring import write_gemini_settings
from tests.support.live_claude import CROSSTALK, bin_dir
from tests.support.tmux_pane import TmuxPane

WAIT_S = 90.0
STOP_S = 20.0
READY = "Type your message"


class LiveGemini:
    def __init__(self, root: Path, env: dict[str, str], mock: ScriptedGemini, cwd: Path, pane: TmuxPane) -> None:
        self.root, self.env, self.mock, self.cwd, self.pane = root, env, mock, cwd, pane
        self.pid = 0

    @classmethod
    def start(
        cls, root: Path, *, crosstalk_home: Path, run_dir: Path, install: bool = True,
        settings: dict[str, Any] | None = None, agents: dict[str, str] | None = None,
    ) -> LiveGemini:  # fmt: skip
        """`install` false: crosstalk is not set up for it; `settings`: more of its user settings (a bare hook);
        `agents`: its user's agent files (`~/.gemini/agents/<name>.md`: name → content), read when it starts."""
        for sub in ("home/.gemini", "tmp"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        cwd = root / root.name
        cwd.mkdir(exist_ok=True)
        mock = ScriptedGemini().start()
        assert isinstance(mock, ScriptedGemini)
        env = {
            "PATH": os.pathsep.join([str(bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8", "TERM": "xterm-256color",
            "GEMINI_API_KEY": "dummy", "GOOGLE_GEMINI_BASE_URL": mock.base_url, "GEMINI_CLI_NO_RELAUNCH": "true",
            "CROSSTALK_HOME": str(crosstalk_home), "CROSSTALK_GEMINI_RUN_DIR": str(run_dir),
        }  # fmt: skip
        write_gemini_settings(root / "home" / ".gemini", settings)
        for name, text in (agents or {}).items():
            (root / "home" / ".gemini" / "agents").mkdir(exist_ok=True)
            (root / "home" / ".gemini" / "agents" / f"{name}.md").write_text(text)
        if install:
            subprocess.run([str(CROSSTALK), "install", "gemini"], env=env, cwd=cwd, check=True, capture_output=True,
                           timeout=60)  # fmt: skip
        cmd = " ".join(["exec env -i", *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                        shlex.quote(str(bin_dir() / "gemini")), "--yolo",
                        f"2>{shlex.quote(str(root / 'gemini.err'))}"])  # fmt: skip
        pane = TmuxPane(f"xg-{root.name}")
        pane.start(cmd, str(cwd))
        session = cls(root, env, mock, cwd, pane)
        try:
            session.pid = int(pane.tmux("display-message", "-p", "-t", pane.name, "#{pane_pid}").strip())
            session.wait_ready()
        except BaseException:
            session.close()
            raise
        return session

    # ------------------------------------------------------------------ driving it
    def wait_ready(self, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while READY not in self.screen():
            assert time.monotonic() < deadline and self.alive(), f"the Gemini TUI did not start\n{self.tail()}"
            time.sleep(0.1)

    def say(self, text: str, timeout: float = 30.0) -> None:
        """Type `text` and submit it. The TUI sometimes takes an Enter that follows typed text closely as part of
        it (a paste): Enter again while the text still waits in the input box (the box is empty once submitted)."""
        self.pane.say(text)
        deadline = time.monotonic() + timeout
        pressed = time.monotonic()
        while READY not in self.screen():
            assert time.monotonic() < deadline and self.alive(), f"the Gemini TUI did not take {text!r}\n{self.tail()}"
            if time.monotonic() - pressed > 2.0:
                self.pane.tmux("send-keys", "-t", self.pane.name, "Enter")
                pressed = time.monotonic()
            time.sleep(0.05)

    def screen(self) -> str:
        return self.pane.screen()

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return self.pid > 0

    # ------------------------------------------------------------------ what its model saw
    def record(self) -> dict[str, Any] | None:
        """crosstalk's hook record of this session (harness/gemini/sessions.py)."""
        path = Path(self.env["CROSSTALK_GEMINI_RUN_DIR"]) / f"{self.pid}.json"
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text())
            return data if isinstance(data, dict) else None
        return None

    def agent(self, timeout: float = WAIT_S) -> Any:
        """The crosstalk agent of this session's current session id (its descriptor), once its shim registered it."""
        from crosstalk.registry.discovery import list_descriptors
        from crosstalk.registry.paths import StatePaths

        paths = StatePaths(Path(self.env["CROSSTALK_HOME"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ref = (self.record() or {}).get("sessionId")
            for d in list_descriptors(paths):
                if d.harness == "gemini" and d.session_ref == ref:
                    return d
            time.sleep(0.05)
        raise AssertionError(f"{self.root.name} has no crosstalk agent\n{self.tail()}")

    def requests(self) -> list[RecordedRequest]:
        return self.mock.conversation_requests()

    def wait_seen(self, needle: str, after: int = 0, timeout: float = WAIT_S) -> RecordedRequest:
        """The first request of the session's own turns (from index `after` of `requests()` on) carrying `needle`
        (searched in the raw JSON body: quotes inside the text read `\\"`)."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((r for r in self.requests()[after:] if needle in r.raw), None)
            if found is not None:
                return found
            assert time.monotonic() < deadline and self.alive(), f"gemini's model never saw {needle!r}\n{self.tail()}"
            time.sleep(0.05)

    def tool_results(self, tool: str, after: int = 0) -> list[str]:
        """The output of every result of `tool` (Gemini's name: mcp_crosstalk_<tool>) the model read, oldest first."""
        out: list[str] = []
        for req in self.requests()[after:]:
            for content in req.body.get("contents") or []:
                for part in content.get("parts") or [] if isinstance(content, dict) else []:
                    resp = part.get("functionResponse") if isinstance(part, dict) else None
                    if isinstance(resp, dict) and resp.get("name") == tool:
                        text = json.dumps(resp.get("response"))
                        if text not in out:
                            out.append(text)
        return out

    def wait_tool_result(self, tool: str, after: int = 0, timeout: float = WAIT_S) -> dict[str, Any]:
        """The JSON answer of the newest call of crosstalk tool `tool` the model read (after index `after`)."""
        name = f"mcp_crosstalk_{tool}"
        deadline = time.monotonic() + timeout
        while True:
            for text in reversed(self.tool_results(name, after)):
                found = answer_of(json.loads(text))
                if found is not None:
                    return found
            assert time.monotonic() < deadline and self.alive(), f"no result of {name} reached gemini's model\n" + (
                self.tail()
            )
            time.sleep(0.05)

    def tail(self) -> str:
        err = self.root / "gemini.err"
        text = err.read_text(errors="replace")[-1500:] if err.exists() else ""
        return f"--- screen\n{self.screen()}\n--- stderr\n{text}"

    def close(self) -> None:
        self.pane.close()
        deadline = time.monotonic() + STOP_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.pid > 0:
                os.killpg(self.pid, signal.SIGKILL)
        self.mock.stop()

    def __enter__(self) -> LiveGemini:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def answer_of(value: Any) -> dict[str, Any] | None:
    """The crosstalk JSON answer inside a function response (a string holding JSON, or nested under output)."""
    if isinstance(value, dict):
        if "state" in value or "agents" in value:
            return value
        for inner in value.values():
            found = answer_of(inner)
            if found is not None:
                return found
    if isinstance(value, list):
        for inner in value:
            found = answer_of(inner)
            if found is not None:
                return found
    if isinstance(value, str):
        start = value.find("{")
        with contextlib.suppress(ValueError):  # Gemini wraps an MCP tool's output: <untrusted_context>{…}</…>
            return answer_of(json.JSONDecoder().raw_decode(value[start:])[0]) if start >= 0 else None
    return None
