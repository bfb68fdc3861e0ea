"""A live Gemini CLI session for `crosstalk demo`: the real interactive `gemini` on a pseudo-terminal the demo holds
(crosstalk.demo.pty_session), crosstalk set up the way a user does (`crosstalk install gemini`: `crosstalk mcp` and
crosstalk's hook), its own HOME and TMPDIR, its model a scripted Gemini API server on 127.0.0.1
(`GOOGLE_GEMINI_BASE_URL` with API-key auth: the only address Gemini CLI then contacts, docs/dev/gemini-adapter.md).

Nothing can start a turn in an idle Gemini CLI session (docs/gemini.md): a message to it waits for its user's next
prompt, which crosstalk's hook hands it over with. The demo is that user: it types the prompts, and says so."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from crosstalk.demo.harnesses import Harnesses, install_crosstalk, session_env
from crosstalk.demo.models import RecordedRequest, ScriptedGemini
from crosstalk.demo.models.wiring import write_gemini_settings
from crosstalk.demo.procs import Procs
from crosstalk.demo.pty_session import PtySession

TOOL_PREFIX = "mcp_crosstalk_"
READY = b"Type your message"  # the TUI's input box is up
START_TIMEOUT_S = 90.0
ENTER_AGAIN_S = 2.0
IDLE_TIMEOUT_S = 60.0


def answer_of(value: Any) -> dict[str, Any] | None:
    """The crosstalk JSON answer inside a function response (a string holding JSON, or nested under output: Gemini
    wraps an MCP tool's output as `<untrusted_context>{…}</untrusted_context>`)."""
    if isinstance(value, dict):
        if "state" in value or "agents" in value:
            return value
        value = list(value.values())
    if isinstance(value, list):
        return next((found for inner in value if (found := answer_of(inner)) is not None), None)
    if isinstance(value, str) and "{" in value:
        with contextlib.suppress(ValueError):
            return answer_of(json.JSONDecoder().raw_decode(value[value.find("{") :])[0])
    return None


class GeminiSession(PtySession):
    title = "Gemini CLI"
    harness = "gemini"
    tool_prefix = TOOL_PREFIX
    side_requests = True  # Gemini CLI asks its model things of its own (its next-speaker check), without tools

    def __init__(self, root: Path, harnesses: Harnesses, crosstalk_home: Path, procs: Procs, first: str) -> None:
        """`first`: the session's first prompt, scripted to make its model call crosstalk's `list_agents` (the first
        tool call registers the session's crosstalk agent); typed once the TUI is up."""
        self.root = root
        self.cwd = root / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.run_dir = root / "run"
        self.run_dir.mkdir(mode=0o700, exist_ok=True)
        self.model = ScriptedGemini()
        self.model.start()
        self.model.scripts_by[first] = f"CALL {TOOL_PREFIX}list_agents {{}}"
        write_gemini_settings(root / "home" / ".gemini")
        self.env = session_env(
            root,
            harnesses,
            crosstalk_home,
            GEMINI_API_KEY="scripted",
            GOOGLE_GEMINI_BASE_URL=self.model.base_url,
            GEMINI_CLI_NO_RELAUNCH="true",
            CROSSTALK_GEMINI_RUN_DIR=str(self.run_dir),  # the hook's records and the shim's socket
            TERM="xterm-256color",  # a TUI: it draws with escape codes, which the demo drops
        )
        install_crosstalk("gemini", self.env, self.cwd)
        self.spawn_on_pty([str(harnesses.bins["gemini"]), "--yolo"], self.env, self.cwd, procs)
        with self._cond:
            if not self._cond.wait_for(lambda: self.shows(READY) or not self.alive(), START_TIMEOUT_S):
                raise RuntimeError(f"the Gemini CLI TUI did not start within {START_TIMEOUT_S:.0f} s\n{self.tail()}")
        if not self.alive():
            raise self.exited()
        self.say(first)

    def say(self, text: str) -> None:
        """Type `text` and submit it. The TUI sometimes takes an Enter that follows typed text closely as part of
        it (a paste): Enter again until the model's request carries the text (an Enter on an empty box does
        nothing)."""
        n = len(self.model.conversation_requests())
        self.type_text(text)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            self.press_enter()
            pressed = time.monotonic()
            while time.monotonic() - pressed < ENTER_AGAIN_S:
                if any(text in r.raw for r in self.model.conversation_requests()[n:]):
                    return
                if not self.alive():
                    raise self.exited()
                time.sleep(0.05)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Gemini CLI TUI did not take the prompt {text!r}\n{self.tail()}")

    def wait_idle(self) -> None:
        """Until the session's turn ended: crosstalk's AfterAgent hook ran (its record for this process says so)."""
        deadline = time.monotonic() + IDLE_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                if json.loads((self.run_dir / f"{self.pid}.json").read_text()).get("event") == "AfterAgent":
                    return
            if not self.alive():
                raise self.exited()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Gemini CLI session's turn did not end\n{self.tail()}")
            time.sleep(0.05)

    def tool_result(self, req: RecordedRequest, tool: str) -> dict[str, Any] | None:
        """The newest result of crosstalk's `tool` this Gemini API request carries, parsed, or None."""
        found = None
        for content in req.body.get("contents") or []:
            for part in (content.get("parts") or []) if isinstance(content, dict) else []:
                resp = part.get("functionResponse") if isinstance(part, dict) else None
                if isinstance(resp, dict) and resp.get("name") == TOOL_PREFIX + tool:
                    found = answer_of(resp.get("response")) or found
        return found
