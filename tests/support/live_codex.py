"""A live Codex for the e2e tests: the real `codex app-server` (pinned 0.171.0) serving its unix control socket
(`--listen unix://`: `$CODEX_HOME/app-server-control/app-server-control.sock`, where the interactive codex attaches),
against a mock Responses server, with crosstalk set up the README way (`crosstalk install codex`). The test drives
one thread through the same socket, as a user's client would (thread/start, turn/start).

    with LiveCodex.start(root / "codex", crosstalk_home=xt) as cx:
        thread = cx.start_thread()
        cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from crosstalk.demo.appserver_client import AppServerClient
from crosstalk.demo.codex_session import first_json
from crosstalk.demo.models import RecordedRequest, ScriptedResponses
from crosstalk.demo.models.wiring import write_codex_config
from tests.support.live_claude import CROSSTALK, bin_dir
from tests.support.tmux_pane import TmuxPane

WAIT_S = 60.0


class LiveCodex:
    def __init__(
        self, root: Path, env: dict[str, str], mock: ScriptedResponses, proc: Any, cwd: Path, listen: Path | None = None
    ) -> None:
        self.root, self.env, self.mock, self.proc, self.cwd = root, env, mock, proc, cwd
        self.listen = listen
        self.socket = listen or Path(env["CODEX_HOME"]) / "app-server-control" / "app-server-control.sock"
        self._client: AppServerClient | None = None

    @classmethod
    def start(cls, root: Path, *, crosstalk_home: Path, listen: Path | None = None, config: str = "") -> LiveCodex:
        """`listen`: serve on that socket (`--listen unix://PATH`, a non-default app-server) instead of the
        control socket. `config`: more config.toml (the benchmarks' bare MCP server)."""
        home, cwd = root / "home", root / root.name
        codex_home = home / ".codex"
        for d in (codex_home, cwd, root / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        mock = ScriptedResponses().start()
        write_codex_config(codex_home, mock.base_url, provider="mock", key_env="MOCK_API_KEY", extra=config)
        env = {
            "PATH": os.pathsep.join([str(bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(home), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8", "TERM": "dumb",
            "CODEX_HOME": str(codex_home), "MOCK_API_KEY": "dummy", "CROSSTALK_HOME": str(crosstalk_home),
        }  # fmt: skip
        subprocess.run([str(CROSSTALK), "install", "codex"], env=env, check=True, capture_output=True, timeout=60)
        with open(root / "codex.err", "wb") as err:
            proc = subprocess.Popen(
                [str(bin_dir() / "codex"), "app-server", "--listen", f"unix://{listen or ''}"], env=env, cwd=cwd,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip
        cx = cls(root, env, mock, proc, cwd, listen)
        deadline = time.monotonic() + WAIT_S
        while not cx.socket.exists():
            assert time.monotonic() < deadline and proc.poll() is None, f"no control socket\n{cx.tail()}"
            time.sleep(0.05)
        cx._connect()
        return cx

    def restart(self) -> None:
        """Stop the app-server (its MCP children, our shims, go with it) and start it again on the same socket."""
        self._disconnect()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(15)
        with open(self.root / "codex.err", "ab") as err:
            self.proc = subprocess.Popen(
                [str(bin_dir() / "codex"), "app-server", "--listen", f"unix://{self.listen or ''}"], env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                self._connect()
                return
            except Exception:
                assert time.monotonic() < deadline and self.proc.poll() is None, f"no app-server\n{self.tail()}"
                time.sleep(0.1)

    # ------------------------------------------------------------------ the driving client
    def _connect(self) -> None:
        self._client = AppServerClient.connect(self.socket, "xt-e2e", WAIT_S)

    def _disconnect(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self._client is not None, "not connected"
        return self._client.request(method, params)

    def start_thread(self) -> str:
        return self.request("thread/start", {"cwd": str(self.cwd)})["thread"]["id"]

    def say(self, thread: str, text: str) -> None:
        self.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": text, "text_elements": []}]})

    def status(self, thread: str) -> str:
        """The thread's status as the app-server reports it: idle, active, ..."""
        return str(self.request("thread/read", {"threadId": thread})["thread"]["status"]["type"])

    def wait_status(self, thread: str, status: str, timeout: float = WAIT_S) -> None:
        """Until the app-server reports the thread `status` (a turn over: idle; one running: active)."""
        deadline = time.monotonic() + timeout
        while (now := self.status(thread)) != status:
            assert time.monotonic() < deadline, f"thread {thread} stayed {now}, never {status}\n{self.tail()}"
            time.sleep(0.05)

    # ------------------------------------------------------------------ what its model saw
    def requests(self) -> list[RecordedRequest]:
        return self.mock.model_requests()

    def agents(self) -> list[Any]:
        """The live crosstalk agents of this app-server's threads (their descriptors)."""
        from crosstalk.registry.discovery import list_descriptors
        from crosstalk.registry.paths import StatePaths

        return [d for d in list_descriptors(StatePaths(Path(self.env["CROSSTALK_HOME"]))) if d.harness == "codex"]

    def wait_seen(self, needle: str, after: int = 0, timeout: float = WAIT_S) -> RecordedRequest:
        return self.mock.wait_seen(needle, after=after, timeout=timeout,
                                   what=lambda: f"codex's model never saw {needle!r}\n{self.tail()}")  # fmt: skip

    def wait_tool_result(self, tool: str, after: int = 0, timeout: float = WAIT_S) -> dict[str, Any]:
        """The parsed output of the newest call of crosstalk tool `tool` that a model request from index `after` on
        carried. Every request repeats the thread's history, so a call whose output an earlier request (before
        `after`) already carried is an earlier turn's, never the one waited for."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            requests = self.requests()
            seen = {i.get("call_id") for r in requests[:after] for i in r.body.get("input") or []
                    if i.get("type") == "function_call_output"}  # fmt: skip
            for req in reversed(requests[after:]):
                items = req.body.get("input") or []
                calls = {i.get("call_id") for i in items if i.get("type") == "function_call" and i.get("name") == tool}
                for item in reversed(items):
                    call = item.get("call_id")
                    if item.get("type") == "function_call_output" and call in calls and call not in seen:
                        with contextlib.suppress(ValueError, TypeError):
                            return first_json(item.get("output"))
            time.sleep(0.05)
        raise AssertionError(f"no result of {tool} reached codex's model\n{self.tail()}")

    def tail(self) -> str:
        return (self.root / "codex.err").read_text(errors="replace")[-2000:]

    def attach_tui(self) -> TmuxPane:
        """The interactive codex attached to this app-server (`codex --remote unix://…`), in a tmux of its own."""
        config = Path(self.env["CODEX_HOME"]) / "config.toml"
        config.write_text(config.read_text() + f'\n[projects."{self.cwd}"]\ntrust_level = "trusted"\n')
        env = {**self.env, "TERM": "xterm-256color"}
        cmd = " ".join(["exec env -i", *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                        shlex.quote(str(bin_dir() / "codex")), "--remote", f"unix://{self.socket}"])  # fmt: skip
        tui = TmuxPane(f"xtc-{os.getpid()}-{len(self.requests())}")
        tui.start(cmd, str(self.cwd))
        deadline = time.monotonic() + WAIT_S
        while "Ask Codex" not in tui.screen():
            if time.monotonic() > deadline:
                tui.close()
                raise AssertionError(f"the codex TUI did not start\n{tui.screen()}")
            time.sleep(0.1)
        return tui

    def close(self) -> None:
        self._disconnect()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.mock.stop()

    def __enter__(self) -> LiveCodex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
