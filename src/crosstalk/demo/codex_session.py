"""A live Codex for `crosstalk demo`: the real `codex app-server` serving its unix control socket (where an
interactive codex attaches), crosstalk set up the way a user does (`crosstalk install codex`), its model a scripted
OpenAI Responses server on 127.0.0.1. The demo drives one thread through that socket as a user's client would
(initialize, thread/start, turn/start)."""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from crosstalk.demo.harnesses import Harnesses, install_crosstalk, session_env
from crosstalk.demo.models import RecordedRequest, ScriptedResponses
from crosstalk.demo.procs import Procs
from crosstalk.demo.session import HarnessSession

MODEL = "scripted-model"
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
        (codex_home / "config.toml").write_text(
            f'model = "{MODEL}"\nmodel_provider = "scripted"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n\n[model_providers.scripted]\nname = "Scripted Responses"\n'
            f'base_url = "{self.model.base_url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n"
        )
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
        self._ws: Any = None
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}

    def connect(self, timeout: float) -> str:
        """Wait for the control socket, attach as a client and start a thread; its id."""
        from websockets.sync.client import unix_connect

        deadline = time.monotonic() + timeout
        while not self.socket.exists():
            if not self.alive():
                raise self.exited()
            if time.monotonic() > deadline:
                raise RuntimeError(f"codex app-server gave no control socket within {timeout:g} s\n{self.tail()}")
            time.sleep(0.05)
        try:
            self._ws = unix_connect(str(self.socket), uri="ws://localhost/", max_size=None, open_timeout=timeout)
        except Exception as exc:  # OSError, or the websockets handshake's own errors
            raise self.failed(exc) from None
        threading.Thread(target=self._read, name="demo-codex-client", daemon=True).start()
        self.request("initialize", {"clientInfo": {"name": "crosstalk-demo", "title": None, "version": "1"},
                                    "capabilities": {"experimentalApi": False}})  # fmt: skip
        self._ws.send(json.dumps({"method": "initialized"}))
        self.thread = self.request("thread/start", {"cwd": str(self.cwd)})["thread"]["id"]
        return self.thread

    def _read(self) -> None:
        with contextlib.suppress(Exception):
            while True:
                message = json.loads(self._ws.recv())
                box = self._answers.get(message.get("id")) if "method" not in message else None
                if box is not None:
                    box.put(message)

    def request(self, method: str, params: dict[str, Any]) -> Any:
        rid = next(self._ids)
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        self._answers[rid] = box
        try:
            self._ws.send(json.dumps({"id": rid, "method": method, "params": params}))
        except Exception as exc:  # the connection closed: websockets' ConnectionClosed
            raise self.failed(exc) from None
        try:
            answer = box.get(timeout=RPC_TIMEOUT_S)
        except queue.Empty:
            raise RuntimeError(f"codex app-server: no answer to {method} within {RPC_TIMEOUT_S:g} s") from None
        if "error" in answer:
            raise RuntimeError(f"codex app-server: {method}: {answer['error']}")
        return answer["result"]

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
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
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
