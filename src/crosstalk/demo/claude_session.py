"""A live, headless Claude Code session for `crosstalk demo`: the real `claude -p --input-format stream-json` (stdin
held open: one turn per user line, and crosstalk's socket-injected turns in between), crosstalk set up for it the way
a user does (`crosstalk install claude`), its own HOME and Claude config dir, its model a scripted Anthropic
Messages server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path
from typing import Any

from crosstalk.demo.harnesses import Harnesses, install_crosstalk, session_env
from crosstalk.demo.models import RecordedRequest, ScriptedAnthropic
from crosstalk.demo.procs import Procs
from crosstalk.demo.session import HarnessSession

# A model id Claude Code knows (an unknown one works too, with a context-window warning on stderr).
MODEL = "claude-sonnet-4-6"
TOOL_PREFIX = "mcp__crosstalk__"


class ClaudeSession(HarnessSession):
    title = "Claude Code"
    harness = "claude"
    tool_prefix = TOOL_PREFIX

    def __init__(self, root: Path, harnesses: Harnesses, crosstalk_home: Path, procs: Procs) -> None:
        self.root = root
        self.cwd = root / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        (root / "run").mkdir(mode=0o700, exist_ok=True)
        self.model = ScriptedAnthropic().start()
        self.env = session_env(
            root,
            harnesses,
            crosstalk_home,
            CLAUDE_CONFIG_DIR=str(root / "home" / ".claude"),
            XDG_RUNTIME_DIR=str(root / "run"),  # Claude's own messaging socket goes under it
            ANTHROPIC_BASE_URL=self.model.base_url,
            ANTHROPIC_API_KEY="scripted",
            IS_SANDBOX="1",  # lets root use --dangerously-skip-permissions
            DISABLE_AUTOUPDATER="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            ENABLE_TOOL_SEARCH="false",  # the crosstalk tools listed up front
            MCP_CONNECTION_NONBLOCKING="0",  # the first turn waits for crosstalk's MCP server
        )
        install_crosstalk("claude", self.env, self.cwd)
        argv = [
            str(harnesses.bins["claude"]), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
            "--verbose", "--dangerously-skip-permissions", "--model", MODEL,
        ]  # fmt: skip
        with open(root / "claude.out", "wb") as out, open(root / "claude.err", "wb") as err:
            self.proc = procs.spawn(argv, env=self.env, cwd=self.cwd, stdin=subprocess.PIPE, stdout=out, stderr=err)
        self.pid = self.proc.pid

    def say(self, text: str) -> None:
        """One user turn (a stream-json line on stdin)."""
        assert self.proc.stdin is not None
        line = {"type": "user", "message": {"role": "user", "content": text}}
        try:
            self.proc.stdin.write((json.dumps(line) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self.exited() from None

    def tool_result(self, req: RecordedRequest, tool: str) -> dict[str, Any] | None:
        return tool_result(req, TOOL_PREFIX + tool)


def tool_result_ids(req: RecordedRequest) -> set[str]:
    """The tool_use ids of every tool result this Anthropic request carries (each request repeats the history)."""
    return {
        str(b.get("tool_use_id"))
        for m in req.body.get("messages") or []
        for b in (m.get("content") if isinstance(m.get("content"), list) else [])
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }


def tool_result_texts(req: RecordedRequest, tool: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """The text of every result of a `tool` call (its full name) this Anthropic request carries, oldest first,
    but those whose tool_use id is in `skip` (results an earlier request already carried)."""
    messages = req.body.get("messages") or []
    ids = {
        b.get("id")
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == tool
    }
    texts = []
    for m in messages:
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in ids - skip:
                content = b.get("content")
                texts.append(content if isinstance(content, str) else "".join(
                    x.get("text", "") for x in content or [] if isinstance(x, dict)))  # fmt: skip
    return texts


def tool_result(req: RecordedRequest, tool: str, skip: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """The parsed result of the newest `tool` call (its full name) this request carries, not one in `skip`, or
    None."""
    found = None
    for text in tool_result_texts(req, tool, skip):
        with contextlib.suppress(ValueError):  # Claude may append <system-reminder> blocks after it
            found = json.JSONDecoder().raw_decode(text.lstrip())[0]
    return found
