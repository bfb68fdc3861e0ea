"""A live OpenCode 1.18.33 process for the e2e tests: `opencode serve` (one process, any number of sessions; a user's
prompt is what the TUI would post, `POST /session/{id}/prompt_async`) against a mock Chat Completions server
(`ScriptedQwenChat`: it answers OpenCode's title requests, which offer no tools, with text), with crosstalk set up the
README's way (`crosstalk install opencode`, user scope). Its own HOME, XDG dirs, TMPDIR and cwd under `root`.

Offline: OpenCode npm-installs `@opencode-ai/plugin` into each config directory on start unless the directory's
node_modules exists and its package-lock.json lists the package (its Npm.install check). crosstalk's plugin imports
nothing, so the config directory is pre-seeded with exactly that (docs/dev/opencode-adapter.md): no network.

    with LiveOpenCode.start(root / "o", crosstalk_home=root / "xt") as oc:
        sid = oc.new_session()
        oc.say(sid, "CALL crosstalk_list_agents {}")

`tui=True`: the interactive TUI instead, in a tmux server of its own (tests/support/tmux_pane.py), with no port:
what it shows is read off the screen, its sessions off the plugin's inbox (`sessions`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from crosstalk.demo.models import RecordedRequest, ScriptedQwenChat
from crosstalk.demo.models.base import text_parts
from crosstalk.demo.models.wiring import OPENCODE_ENV, write_opencode_config
from tests.support.live_claude import CROSSTALK, bin_dir
from tests.support.tmux_pane import TmuxPane

WAIT_S = 60.0
STOP_S = 10.0
READY = "Ask anything"  # the TUI's prompt is up and takes keys


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveOpenCode:
    def __init__(self, root: Path, env: dict[str, str], mock: ScriptedQwenChat, cwd: Path) -> None:
        self.root, self.env, self.mock, self.cwd = root, env, mock, cwd
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pane: TmuxPane | None = None
        self._out = (root / "opencode.out").open("wb")

    @classmethod
    def start(
        cls, root: Path, *, crosstalk_home: Path, extra_env: dict[str, str] | None = None, tui: bool = False
    ) -> LiveOpenCode:
        for sub in ("home/.config/opencode", "tmp", "run"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "run").chmod(0o700)
        cwd = root / root.name
        cwd.mkdir(exist_ok=True)
        mock = ScriptedQwenChat().start()
        home = root / "home"
        env = {
            "PATH": os.pathsep.join([str(bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(home), "TMPDIR": str(root / "tmp"), "XDG_RUNTIME_DIR": str(root / "run"),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
            "LANG": "C.UTF-8", "CROSSTALK_HOME": str(crosstalk_home), **OPENCODE_ENV, **(extra_env or {}),
        }  # fmt: skip
        config_dir = home / ".config" / "opencode"
        write_opencode_config(config_dir, mock.base_url)
        subprocess.run([str(CROSSTALK), "install", "opencode"], env=env, cwd=cwd, check=True, capture_output=True,
                       timeout=60)  # fmt: skip
        oc = cls(root, env, mock, cwd)
        try:
            if tui:
                tui_env = {**env, "TERM": "xterm-256color"}
                words = [f"{k}={shlex.quote(v)}" for k, v in tui_env.items()]
                err = shlex.quote(str(root / "tui.err"))
                cmd = " ".join(["exec env -i", *words, shlex.quote(str(bin_dir() / "opencode")), f"2>{err}"])
                oc.pane = TmuxPane(f"xo-{root.name}")
                oc.pane.start(cmd, str(cwd))
                oc.wait_ready()
                return oc
            oc.proc = subprocess.Popen(
                [str(bin_dir() / "opencode"), "serve", "--port", str(oc.port), "--hostname", "127.0.0.1"],
                cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=oc._out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            oc.wait_ready()
        except BaseException:
            oc.close()
            raise
        return oc

    # ------------------------------------------------------------------ driving it
    def http(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method, data=data,
                                     headers={"content-type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def wait_ready(self, timeout: float = WAIT_S) -> None:
        """The plugin bound its inbox and answers (and the server answers, for `opencode serve`)."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError, ValueError, AssertionError):
                if self.pane is None:
                    self.http("GET", "/session", timeout=2)
                if self.plugin({"op": "hello"}).get("pid") and (self.pane is None or READY in self.screen()):
                    return
            assert time.monotonic() < deadline and self.alive(), f"OpenCode did not start\n{self.tail()}"
            time.sleep(0.1)

    def installed_nothing(self) -> list[str]:
        """What OpenCode npm-installed under this HOME (nothing: the pre-seeded check held, no network was asked)."""
        home = Path(self.env["HOME"])
        return sorted(str(p) for p in home.rglob("node_modules/*"))

    def inbox(self) -> Path:
        """The plugin's inbox (this OpenCode's XDG_RUNTIME_DIR has only its own, and those its earlier runs left)."""
        from crosstalk.harness.opencode import inbox

        pids = inbox.live_pids(self.env)
        assert len(pids) == 1, pids
        return inbox.socket_path(self.env, pids[0])

    def plugin(self, request: dict[str, Any], timeout: float = 15) -> dict[str, Any]:
        from crosstalk.harness.opencode import inbox

        return inbox.request(self.inbox(), request, timeout)

    def sessions(self) -> list[dict[str, Any]]:
        return list(self.plugin({"op": "sessions"})["sessions"])

    def type(self, text: str) -> None:
        """What the user types into the TUI, then Enter."""
        assert self.pane is not None
        self.pane.say(text)

    def screen(self) -> str:
        return self.pane.screen() if self.pane is not None else ""

    def new_session(self, title: str | None = None) -> str:
        return str(self.http("POST", "/session", {"title": title} if title else {})["id"])

    def say(self, session: str, text: str) -> None:
        """What a user typing into the session does (the TUI posts the same)."""
        self.http("POST", f"/session/{session}/prompt_async", {"parts": [{"type": "text", "text": text}]})

    def busy(self, session: str) -> bool:
        if self.pane is not None:
            return any(x["id"] == session and x["status"] != "idle" for x in self.sessions())
        st = self.http("GET", "/session/status") or {}
        return isinstance(st, dict) and (st.get(session) or {}).get("type", "idle") != "idle"

    def wait_idle(self, session: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while self.busy(session):
            assert time.monotonic() < deadline, f"{session} stayed busy\n{self.tail()}"
            time.sleep(0.05)

    def messages(self, session: str) -> list[str]:
        """The text of every user message OpenCode keeps in `session`, oldest first."""
        out = []
        for m in self.http("GET", f"/session/{session}/message") or []:
            if isinstance(m, dict) and (m.get("info") or {}).get("role") == "user":
                out.append("".join(p.get("text", "") for p in m.get("parts") or [] if p.get("type") == "text"))
        return out

    def alive(self) -> bool:
        if self.pane is not None:
            return bool(self.pane.tmux("list-panes", "-t", self.pane.name, "-F", "#{pane_dead}").strip() == "0")
        return self.proc is not None and self.proc.poll() is None

    # ------------------------------------------------------------------ what it is and what its model saw
    def agent(self, session: str, timeout: float = WAIT_S) -> Any:
        from crosstalk.registry.discovery import list_descriptors
        from crosstalk.registry.paths import StatePaths

        paths = StatePaths(Path(self.env["CROSSTALK_HOME"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in list_descriptors(paths):
                if d.harness == "opencode" and d.session_ref == session:
                    return d
            time.sleep(0.05)
        raise AssertionError(f"{session} has no crosstalk agent\n{self.tail()}")

    def requests(self) -> list[RecordedRequest]:
        return self.mock.conversation_requests()

    def wait_seen(self, needle: str, after: int = 0, timeout: float = WAIT_S) -> RecordedRequest:
        deadline = time.monotonic() + timeout
        while True:
            found = next((r for r in self.requests()[after:] if needle in r.raw), None)
            if found is not None:
                return found
            assert time.monotonic() < deadline and self.alive(), f"OpenCode's model never saw {needle!r}\n{self.tail()}"
            time.sleep(0.02)

    def wait_tool_result(self, tool: str, needle: str = "", after: int = 0, timeout: float = WAIT_S) -> dict[str, Any]:
        """The JSON of the newest result of crosstalk tool `tool` (`crosstalk_<tool>`) the model read, from a request
        (from index `after` on) that carries `needle`."""
        name = f"crosstalk_{tool}"
        deadline = time.monotonic() + timeout
        while True:
            for req in reversed(self.requests()[after:]):
                if needle not in req.raw:
                    continue
                msgs = req.body.get("messages") or []
                ids = {c.get("id") for m in msgs if isinstance(m, dict) for c in m.get("tool_calls") or []
                       if isinstance(c, dict) and c.get("function", {}).get("name") == name}  # fmt: skip
                for m in reversed(msgs):
                    if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id") in ids:
                        text = text_parts(m.get("content"))
                        with contextlib.suppress(ValueError):
                            found = json.loads(text[text.find("{") :])
                            if isinstance(found, dict):
                                return found
            assert time.monotonic() < deadline and self.alive(), f"no result of {name} reached the model\n{self.tail()}"
            time.sleep(0.05)

    def tail(self) -> str:
        out = self.root / ("tui.err" if self.pane is not None else "opencode.out")
        text = out.read_text(errors="replace")[-1500:] if out.exists() else ""
        return f"--- screen\n{self.screen()}\n--- output\n{text}" if self.pane is not None else text

    def close(self) -> None:
        if self._out.closed:
            return
        if self.pane is not None:
            self.pane.close()
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(STOP_S)
        self._out.close()
        self.mock.stop()

    def __enter__(self) -> LiveOpenCode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
