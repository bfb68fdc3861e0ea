"""A live Qwen Code session for `crosstalk demo`: the real interactive `qwen` (only its TUI registers a session and
listens on an inbox; `qwen -p` does neither, docs/qwen.md) on a pseudo-terminal the demo holds, crosstalk set up the
way a user does (`crosstalk install qwen`), its own HOME, QWEN_HOME and XDG_RUNTIME_DIR, its model a scripted Chat
Completions server on 127.0.0.1. Its first prompt is given on the command line (`-i`), so nothing is typed into the
TUI; what the TUI draws is read and dropped (a full pty would stall it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crosstalk.demo.harnesses import Harnesses, install_crosstalk, session_env
from crosstalk.demo.models import RecordedRequest, ScriptedQwenChat
from crosstalk.demo.models.chat import chat_tool_result
from crosstalk.demo.models.wiring import MODEL, write_qwen_settings
from crosstalk.demo.procs import Procs
from crosstalk.demo.pty_session import PtySession

TOOL_PREFIX = "mcp__crosstalk__"


class QwenSession(PtySession):
    title = "Qwen Code"
    harness = "qwen"
    tool_prefix = TOOL_PREFIX
    side_requests = True  # its TUI asks its model things of its own, without tools

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
        self.spawn_on_pty([str(harnesses.bins["qwen"]), "-i", first], self.env, self.cwd, procs)

    def say(self, text: str) -> None:
        """Type `text`; once the TUI echoed its end (it read the keys), press Enter (an Enter sent with the text
        would be taken as part of a paste)."""
        self.type_text(text)
        self.press_enter()

    def tool_result(self, req: RecordedRequest, tool: str) -> dict[str, Any] | None:
        return chat_tool_result(req, TOOL_PREFIX + tool)
