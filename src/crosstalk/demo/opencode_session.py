"""A live OpenCode session for `crosstalk demo`: the real `opencode serve` (one OpenCode process; its session is
created and prompted over OpenCode's own HTTP API on 127.0.0.1, as its TUI does), crosstalk set up the way a user
does (`crosstalk install opencode`: crosstalk's plugin and `crosstalk mcp`), its own HOME, XDG dirs and TMPDIR, its
model a scripted Chat Completions server on 127.0.0.1 (a custom openai-compatible provider in its opencode.json)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from crosstalk.demo.harnesses import Harnesses, install_crosstalk, session_env
from crosstalk.demo.models import RecordedRequest, ScriptedQwenChat
from crosstalk.demo.models.chat import chat_tool_result
from crosstalk.demo.models.wiring import OPENCODE_ENV, write_opencode_config
from crosstalk.demo.procs import Procs
from crosstalk.demo.session import HarnessSession

TOOL_PREFIX = "crosstalk_"
START_TIMEOUT_S = 60.0
HTTP_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OpenCodeSession(HarnessSession):
    title = "OpenCode"
    harness = "opencode"
    tool_prefix = TOOL_PREFIX
    side_requests = True  # OpenCode asks its model for a session title, without tools

    def __init__(self, root: Path, harnesses: Harnesses, crosstalk_home: Path, procs: Procs, first: str) -> None:
        """`first`: the session's first prompt, scripted to make its model call crosstalk's `list_agents` (the first
        tool call registers the session's crosstalk agent)."""
        self.root = root
        self.cwd = root / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        (root / "run").mkdir(mode=0o700, exist_ok=True)
        self.model = ScriptedQwenChat().start()  # Qwen's flavour: a side request (no tools) is answered with text
        self.model.scripts_by[first] = f"CALL {TOOL_PREFIX}list_agents {{}}"
        home = root / "home"
        self.env = session_env(
            root,
            harnesses,
            crosstalk_home,
            XDG_RUNTIME_DIR=str(root / "run"),  # the plugin's inbox socket goes under it
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_DATA_HOME=str(home / ".local/share"),
            XDG_CACHE_HOME=str(home / ".cache"),
            XDG_STATE_HOME=str(home / ".local/state"),
            **OPENCODE_ENV,
        )
        write_opencode_config(home / ".config" / "opencode", self.model.base_url)
        install_crosstalk("opencode", self.env, self.cwd)
        self.port = _free_port()
        argv = [str(harnesses.bins["opencode"]), "serve", "--port", str(self.port), "--hostname", "127.0.0.1"]
        with open(root / "opencode.err", "wb") as err:
            self.proc = procs.spawn(argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        self.pid = self.proc.pid
        self._wait_up()
        self.session = str(self._http("POST", "/session", {})["id"])
        self.say(first)

    def _http(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method, data=data,
                                     headers={"content-type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def _wait_up(self) -> None:
        """Until OpenCode's server answers and crosstalk's plugin in it bound its inbox."""
        from crosstalk.harness.opencode import inbox

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError, ValueError):
                self._http("GET", "/session")
                if inbox.live_pids(self.env):
                    return
            if not self.alive():
                raise self.exited()
            if time.monotonic() > deadline:
                raise RuntimeError(f"OpenCode did not start within {START_TIMEOUT_S:.0f} s\n{self.tail()}")
            time.sleep(0.1)

    def say(self, text: str) -> None:
        """What a user typing `text` into the session does (OpenCode's TUI posts the same)."""
        try:
            self._http("POST", f"/session/{self.session}/prompt_async", {"parts": [{"type": "text", "text": text}]})
        except OSError as exc:
            raise self.exited() if not self.alive() else RuntimeError(f"OpenCode refused a prompt: {exc}") from exc

    def tool_result(self, req: RecordedRequest, tool: str) -> dict[str, Any] | None:
        return chat_tool_result(req, TOOL_PREFIX + tool)

    def close(self, procs: Procs) -> None:
        procs.stop(self.proc)
        self.model.stop()
