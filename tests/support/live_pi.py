"""A live pi 0.73.1 session for the e2e tests and benchmarks: `pi --mode rpc` (prompts on stdin, events on stdout)
against a mock chat-completions server, with crosstalk set up the README's way (`crosstalk install pi`) and enabled
by the environment (`PI_CROSSTALK=1`, plus any PI_CROSSTALK_* given). Its own HOME, agent dir and cwd under `root`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from crosstalk.demo.models import RecordedRequest, ScriptedChat
from crosstalk.demo.models.wiring import MODEL, write_pi_models
from tests.support.live_claude import CROSSTALK, bin_dir

WAIT_S = 60.0


def prepare(
    root: Path, crosstalk_home: Path, crosstalk_env: dict[str, str]
) -> tuple[dict[str, str], ScriptedChat, Path]:
    """The session's dirs, environment (nothing of the caller's but PATH), mock and models.json; crosstalk
    installed for it the README's way and enabled (PI_CROSSTALK=1)."""
    home, cwd = root / "home", root / root.name
    agent_dir = home / ".pi" / "agent"
    for d in (agent_dir, cwd, root / "tmp"):
        d.mkdir(parents=True, exist_ok=True)
    mock = ScriptedChat().start()
    write_pi_models(agent_dir, mock.base_url, provider="mock")
    env = {
        "PATH": os.pathsep.join([str(bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(home), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8", "TERM": "dumb",
        "PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", "PI_TELEMETRY": "0",
        "CROSSTALK_HOME": str(crosstalk_home), "PI_CROSSTALK": "1", **crosstalk_env,
    }  # fmt: skip
    subprocess.run([str(CROSSTALK), "install", "pi"], env=env, check=True, capture_output=True, timeout=60)
    return env, mock, cwd


class LivePi:
    def __init__(self, root: Path, env: dict[str, str], mock: ScriptedChat, proc: subprocess.Popen[bytes]) -> None:
        self.root, self.env, self.mock, self.proc = root, env, mock, proc
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1_000_000))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, root: Path, *, crosstalk_home: Path, args: tuple[str, ...] = (), **crosstalk_env: str) -> LivePi:
        """`args`: more pi arguments (the benchmark's bare extension); `crosstalk_env`: PI_CROSSTALK_* and the like."""
        env, mock, cwd = prepare(root, crosstalk_home, crosstalk_env)
        with open(root / "pi.err", "wb") as err:
            proc = subprocess.Popen(
                [str(bin_dir() / "pi"), "--mode", "rpc", "--provider", "mock", "--model", MODEL, *args],
                env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True,
            )  # fmt: skip
        pi = cls(root, env, mock, proc)
        pi.agent()  # crosstalk is up: the extension's core registered the session
        return pi

    # ------------------------------------------------------------------ driving it
    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(raw)
                with self._lock:
                    self.events.append(event)

    def command(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """One RPC command; its response."""
        rid = f"t{next(self._ids)}"
        assert self.proc.stdin is not None and self.proc.poll() is None, self.tail()
        self.proc.stdin.write((json.dumps({**cmd, "id": rid}) + "\n").encode())
        self.proc.stdin.flush()
        return self.wait_event(lambda e: e.get("type") == "response" and e.get("id") == rid)

    def say(self, text: str, **options: Any) -> dict[str, Any]:
        """A user prompt (a slash command runs at once, even while streaming)."""
        return self.command({"type": "prompt", "message": text, **options})

    def wait_event(self, predicate: Any, after: int = 0, timeout: float = WAIT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = next((e for e in self.events[after:] if predicate(e)), None)
            if found is not None:
                return found
            assert time.monotonic() < deadline and self.proc.poll() is None, f"no such pi event\n{self.tail()}"
            time.sleep(0.01)

    def notices(self) -> list[str]:
        """What the extension told the user (ctx.ui.notify, as RPC mode carries it)."""
        with self._lock:
            return [str(e.get("message")) for e in self.events
                    if e.get("type") == "extension_ui_request" and e.get("method") == "notify"]  # fmt: skip

    def idle(self, quiet_s: float = 0.3, timeout: float = WAIT_S) -> None:
        """Wait until pi is not streaming and no model request came for `quiet_s`."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.command({"type": "get_state"})["data"]
            before = len(self.requests())
            time.sleep(quiet_s)
            if not state.get("isStreaming") and len(self.requests()) == before:
                return
            assert time.monotonic() < deadline, self.tail()

    # ------------------------------------------------------------------ what it is and what its model saw
    def session_id(self) -> str:
        return str(self.command({"type": "get_state"})["data"]["sessionId"])

    def agent(self, timeout: float = WAIT_S) -> Any:
        """This session's crosstalk agent (its descriptor), once the extension's core registered it."""
        from crosstalk.registry.discovery import list_descriptors
        from crosstalk.registry.paths import StatePaths

        sid = self.session_id()
        paths = StatePaths(Path(self.env["CROSSTALK_HOME"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in list_descriptors(paths):
                if d.harness == "pi" and d.session_ref == sid:
                    return d
            assert self.proc.poll() is None, self.tail()
            time.sleep(0.05)
        raise AssertionError(f"pi session {sid} has no crosstalk agent\n{self.tail()}")

    def requests(self) -> list[RecordedRequest]:
        return self.mock.model_requests()

    def user_texts(self, req: RecordedRequest) -> list[str]:
        """The user messages of one model request, in order."""
        from crosstalk.demo.models.base import text_parts

        return [text_parts(m.get("content")) for m in req.body.get("messages") or [] if m.get("role") == "user"]

    def wait_seen(self, needle: str, after: int = 0, timeout: float = WAIT_S) -> RecordedRequest:
        return self.mock.wait_seen(needle, after=after, timeout=timeout,
                                   what=lambda: f"pi's model never saw {needle!r}\n{self.tail()}")  # fmt: skip

    def tail(self) -> str:
        err = (self.root / "pi.err").read_text(errors="replace")[-2000:] if (self.root / "pi.err").exists() else ""
        with self._lock:
            last = [json.dumps(e)[:300] for e in self.events[-12:] if e.get("type") != "message_update"]
        return "--- stderr\n" + err + "\n--- last events\n" + "\n".join(last)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self._reader.join(10)  # it ends at EOF, now that pi has exited; then its pipe is closed here
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.mock.stop()

    def __enter__(self) -> LivePi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
