"""A live Codex for `crosstalk demo`: the real `codex app-server` serving its unix control socket (where an
interactive codex attaches), crosstalk set up the way a user does (`crosstalk install codex`), its model a scripted
OpenAI Responses server on 127.0.0.1. The demo drives one thread through that socket as a user's client would
(initialize, thread/start, turn/start)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from crosstalk.demo.appserver_client import AppServerClient, AppServerClientError
from crosstalk.demo.harnesses import Harnesses, install_crosstalk, session_env
from crosstalk.demo.models import RecordedRequest, ScriptedResponses
from crosstalk.demo.models.wiring import write_codex_config
from crosstalk.demo.procs import Procs
from crosstalk.demo.session import HarnessSession

TOOL_PREFIX = "mcp__crosstalk."
RPC_TIMEOUT_S = 60.0


class CodexSession(HarnessSession):
    title = "Codex"
    harness = "codex"
    tool_prefix = TOOL_PREFIX

    def __init__(self, root: Path, harnesses: Harnesses, crosstalk_home: Path, procs: Procs) -> None:
        self.root = root
        self.cwd = root / "work"
        codex_home = root / "home" / ".codex"
        for d in (self.cwd, codex_home):
            d.mkdir(parents=True, exist_ok=True)
        self.model = ScriptedResponses().start()
        write_codex_config(codex_home, self.model.base_url)
        self.env = session_env(root, harnesses, crosstalk_home, CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="x")
        install_crosstalk("codex", self.env, self.cwd)
        self.socket = codex_home / "app-server-control" / "app-server-control.sock"
        with open(root / "codex.err", "wb") as err:
            self.proc = procs.spawn(
                [str(harnesses.bins["codex"]), "app-server", "--listen", "unix://"],
                env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        self.pid = self.proc.pid
        self.thread = ""
        self._client: AppServerClient | None = None

    def connect(self, timeout: float) -> str:
        """Wait for the control socket, attach as a client and start a thread; its id."""
        deadline = time.monotonic() + timeout
        while not self.socket.exists():
            if not self.alive():
                raise self.exited()
            if time.monotonic() > deadline:
                raise RuntimeError(f"codex app-server gave no control socket within {timeout:g} s\n{self.tail()}")
            time.sleep(0.05)
        try:
            self._client = AppServerClient.connect(self.socket, "crosstalk-demo", RPC_TIMEOUT_S)
        except AppServerClientError as exc:
            raise self.failed(exc) from None
        self.thread = self.request("thread/start", {"cwd": str(self.cwd)})["thread"]["id"]
        return self.thread

    def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self._client is not None, "connect() first"
        try:
            return self._client.request(method, params)
        except AppServerClientError as exc:
            raise self.failed(exc) from None

    def say(self, text: str) -> None:
        """One user turn on the thread."""
        self.request("turn/start", {"threadId": self.thread,
                                    "input": [{"type": "text", "text": text, "text_elements": []}]})  # fmt: skip

    def tool_result(self, req: RecordedRequest, tool: str) -> dict[str, Any] | None:
        """The parsed output of the newest call of crosstalk tool `tool` this request carries, or None."""
        items = req.body.get("input") or []
        calls = {i.get("call_id") for i in items if i.get("type") == "function_call" and i.get("name") == tool}
        found = None
        for item in items:
            if item.get("type") == "function_call_output" and item.get("call_id") in calls:
                with contextlib.suppress(ValueError, TypeError):
                    found = first_json(item.get("output"))
        return found

    def close(self, procs: Procs) -> None:
        if self._client is not None:
            self._client.close()
        procs.stop(self.proc)  # the app-server's MCP children (crosstalk's shim) are in its group
        self.model.stop()

    def failed(self, exc: Exception) -> RuntimeError:
        return self.exited() if not self.alive() else RuntimeError(f"codex app-server: {exc}")


def first_json(output: Any) -> dict[str, Any]:
    """A function_call_output's JSON: a string, or content blocks whose text holds it."""
    if isinstance(output, list):
        output = "".join(b.get("text", "") for b in output if isinstance(b, dict))
    if isinstance(output, dict):
        output = output.get("content") or output.get("output") or json.dumps(output)
    text = str(output).lstrip()
    return json.JSONDecoder().raw_decode(text[text.find("{") :])[0]
