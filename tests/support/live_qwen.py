"""A live Qwen Code 0.24.4 session for the e2e tests and benchmarks: the interactive TUI (the only mode that
registers in `$QWEN_HOME/sessions/` and listens on an inbox) in a tmux server of its own (tests/support/tmux_pane.py),
against a mock Chat Completions server (`ScriptedQwenChat`), with crosstalk set up the README's way
(`crosstalk install qwen`). Its own HOME, XDG_RUNTIME_DIR, TMPDIR and cwd under `root`; sessions of one test may
share one QWEN_HOME (as one user's sessions share ~/.qwen) and one CROSSTALK_HOME.

    with LiveQwen.start(root / "q", crosstalk_home=root / "xt", qwen_home=root / "qwen") as q:
        q.say("CALL mcp__crosstalk__list_agents {}")
        q.wait_seen("...")
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

from crosstalk.demo.models import RecordedRequest, ScriptedQwenChat
from crosstalk.demo.models.base import text_parts
from crosstalk.demo.models.wiring import MODEL, write_qwen_settings
from tests.support.live_claude import CROSSTALK, bin_dir
from tests.support.tmux_pane import TmuxPane

WAIT_S = 60.0
STOP_S = 20.0
READY = "Type your message"  # the TUI's input prompt is up


def prepare(
    root: Path, crosstalk_home: Path, qwen_home: Path, *, install: bool, settings: dict[str, Any] | None
) -> tuple[dict[str, str], ScriptedQwenChat, Path]:
    """The session's dirs, environment (nothing of the caller's but PATH), mock and settings; crosstalk installed
    for it the README's way when `install`."""
    for sub in ("home", "tmp", "run"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "run").chmod(0o700)
    cwd = root / root.name
    cwd.mkdir(exist_ok=True)
    mock = ScriptedQwenChat().start()
    env = {
        "PATH": os.pathsep.join([str(bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "XDG_RUNTIME_DIR": str(root / "run"),
        "LANG": "C.UTF-8", "TERM": "xterm-256color", "QWEN_HOME": str(qwen_home),
        "OPENAI_BASE_URL": f"{mock.base_url}/v1", "OPENAI_API_KEY": "dummy", "OPENAI_MODEL": MODEL,
        "CROSSTALK_HOME": str(crosstalk_home),
    }  # fmt: skip
    if not (qwen_home / "settings.json").exists():
        write_qwen_settings(qwen_home)
    if settings:  # per session: the workspace's .qwen/settings.json
        (cwd / ".qwen").mkdir(exist_ok=True)
        (cwd / ".qwen" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    if install:
        subprocess.run([str(CROSSTALK), "install", "qwen"], env=env, cwd=cwd, check=True, capture_output=True,
                       timeout=60)  # fmt: skip
    return env, mock, cwd


class LiveQwen:
    def __init__(self, root: Path, env: dict[str, str], mock: ScriptedQwenChat, cwd: Path, pane: TmuxPane) -> None:
        self.root, self.env, self.mock, self.cwd, self.pane = root, env, mock, cwd, pane
        self.pid = 0

    @classmethod
    def start(
        cls,
        root: Path,
        *,
        crosstalk_home: Path,
        qwen_home: Path | None = None,
        install: bool = True,
        settings: dict[str, Any] | None = None,
        args: tuple[str, ...] = (),
    ) -> LiveQwen:
        """`install` false: a session without crosstalk (the shared settings may list crosstalk for the others: it
        is excluded for this one, `--allowed-mcp-server-names none`). `settings`: this session's workspace
        settings (e.g. {"agents": {"crossSessionInbound": "refuse"}})."""
        env, mock, cwd = prepare(root, crosstalk_home, qwen_home or root / "home" / ".qwen", install=install,
                                 settings=settings)  # fmt: skip
        argv = [str(bin_dir() / "qwen"), *args]
        if not install:
            argv += ["--allowed-mcp-server-names", "none"]
        cmd = " ".join(["exec env -i", *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                        *map(shlex.quote, argv), f"2>{shlex.quote(str(root / 'qwen.err'))}"])  # fmt: skip
        pane = TmuxPane(f"xq-{root.name}")
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
    def wait_ready(self, timeout: float = WAIT_S) -> dict[str, Any]:
        """The TUI is up and registered (its record names an inbox)."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.record()
            if record and record.get("ipcPath") and READY in self.screen():
                return record
            assert time.monotonic() < deadline and self.alive(), f"the Qwen TUI did not start\n{self.tail()}"
            time.sleep(0.1)

    def say(self, text: str) -> None:
        self.pane.say(text)

    def screen(self) -> str:
        return self.pane.screen()

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return self.pid > 0

    # ------------------------------------------------------------------ what it is and what its model saw
    def qwen_home(self) -> Path:
        return Path(self.env["QWEN_HOME"])

    def record(self) -> dict[str, Any] | None:
        """Its registry record (the qwen process is the pane's process: `exec env -i ... qwen`, which re-launches
        itself once; the record is the inner process's)."""
        for path in sorted((self.qwen_home() / "sessions").glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text())
                if isinstance(data, dict) and self._ours(int(data.get("pid") or 0)):
                    return data
        return None

    def _ours(self, pid: int) -> bool:
        while pid > 1:
            if pid == self.pid:
                return True
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return False
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        return False

    def session_id(self) -> str:
        return str((self.record() or {}).get("sessionId") or "")

    def agent(self, timeout: float = WAIT_S) -> Any:
        """The crosstalk agent of this session's current session id (its descriptor), once its shim registered it."""
        from crosstalk.registry.discovery import list_descriptors
        from crosstalk.registry.paths import StatePaths

        paths = StatePaths(Path(self.env["CROSSTALK_HOME"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ref = self.session_id()
            for d in list_descriptors(paths):
                if d.harness == "qwen" and d.session_ref == ref:
                    return d
            time.sleep(0.05)
        raise AssertionError(f"{self.root.name} has no crosstalk agent\n{self.tail()}")

    def requests(self) -> list[RecordedRequest]:
        return self.mock.conversation_requests()

    def wait_seen(self, needle: str, after: int = 0, timeout: float = WAIT_S) -> RecordedRequest:
        """The first request of the session's own turns (from index `after` of `requests()` on) carrying `needle`."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((r for r in self.requests()[after:] if needle in r.raw), None)
            if found is not None:
                return found
            assert time.monotonic() < deadline and self.alive(), f"qwen's model never saw {needle!r}\n{self.tail()}"
            time.sleep(0.02)

    def tool_results(self, tool: str, after: int = 0) -> list[str]:
        """The text of every result of `tool` the model read (requests from index `after` on), oldest first."""
        out: list[str] = []
        for req in self.requests()[after:]:
            msgs = req.body.get("messages") or []
            names = {c.get("id"): c.get("function", {}).get("name") for m in msgs if isinstance(m, dict)
                     for c in m.get("tool_calls") or [] if isinstance(c, dict)}  # fmt: skip
            for m in msgs:
                if isinstance(m, dict) and m.get("role") == "tool" and names.get(m.get("tool_call_id")) == tool:
                    text = text_parts(m.get("content"))
                    if text not in out:
                        out.append(text)
        return out

    def wait_tool_result(self, tool: str, after: int = 0, timeout: float = WAIT_S) -> dict[str, Any]:
        """The JSON of the newest result of crosstalk tool `tool` the model read (after index `after`)."""
        name = f"mcp__crosstalk__{tool}"
        deadline = time.monotonic() + timeout
        while True:
            for text in reversed(self.tool_results(name, after)):
                start = text.find("{")
                with contextlib.suppress(ValueError):
                    found = json.loads(text[start:]) if start >= 0 else None
                    if isinstance(found, dict):
                        return found
            assert time.monotonic() < deadline and self.alive(), f"no result of {name} reached qwen's model\n" + (
                self.tail()
            )
            time.sleep(0.05)

    def tail(self) -> str:
        err = (self.root / "qwen.err").read_text(errors="replace")[-1500:] if (self.root / "qwen.err").exists() else ""
        return f"--- screen\n{self.screen()}\n--- stderr\n{err}"

    def close(self) -> None:
        self.pane.close()
        deadline = time.monotonic() + STOP_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.pid > 0:
                os.killpg(self.pid, signal.SIGKILL)
        self.mock.stop()

    def __enter__(self) -> LiveQwen:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
