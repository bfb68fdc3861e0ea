"""Live Claude Code sessions for the e2e tests: the real `claude` (pinned) as a long-lived headless session
(`-p --input-format stream-json`, stdin held open: one turn per user line, and socket-injected turns in between),
with crosstalk installed the README way (`crosstalk install claude`: the MCP entry and the skill), each session with
its own HOME, runtime dir and mock Anthropic server; the sessions of one test share one Claude config dir (as one
user's sessions share ~/.claude: Claude's own ListAgents and SendMessage see each other) and one CROSSTALK_HOME.

    with LiveClaude.start(root / "a", home=xt_home) as a:
        a.say('CALL mcp__crosstalk__list_agents {}')
        a.wait_seen("...")                      # the model request that carried it
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mock_models import MockAnthropic, RecordedRequest

from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import list_descriptors
from crosstalk.registry.paths import StatePaths

REPO = Path(__file__).resolve().parents[2]
CROSSTALK = REPO / ".venv" / "bin" / "crosstalk"
CLAUDE_MODEL = "claude-sonnet-4-6"
WAIT_S = 60.0
STOP_S = 20.0


def bin_dir() -> Path:
    return Path(os.environ.get("CROSSTALK_E2E_BIN") or REPO / ".harnesses" / "node_modules" / ".bin")


@dataclass
class LiveClaude:
    root: Path
    env: dict[str, str]
    mock: MockAnthropic
    proc: subprocess.Popen[bytes]
    cwd: Path
    _said: int = field(default=0)

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(
        cls, root: Path, *, crosstalk_home: Path, config_dir: Path | None = None, install: bool = True
    ) -> LiveClaude:
        """A session in `root` (its cwd is `root/<basename>`; its Claude config dir `config_dir`, default its own),
        crosstalk set up for it unless `install` is false (a session without crosstalk, in a config dir of its
        own: `crosstalk install` is per config dir)."""
        config = config_dir or root / "home" / ".claude"
        config.mkdir(parents=True, exist_ok=True)
        for sub in ("home", "tmp", "run"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "run").chmod(0o700)
        cwd = root / root.name
        cwd.mkdir(exist_ok=True)
        mock = MockAnthropic().start()
        env = {
            "PATH": os.pathsep.join([str(bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(root / "home"),
            "TMPDIR": str(root / "tmp"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "CLAUDE_CONFIG_DIR": str(config),
            "XDG_RUNTIME_DIR": str(root / "run"),  # the messaging socket: $XDG_RUNTIME_DIR/cc-socks/<pid>.sock
            "ANTHROPIC_BASE_URL": mock.base_url,
            "ANTHROPIC_API_KEY": "dummy",
            "IS_SANDBOX": "1",  # lets root use --dangerously-skip-permissions
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "ENABLE_TOOL_SEARCH": "false",  # MCP tools listed up front, not behind a search tool
            "MCP_CONNECTION_NONBLOCKING": "0",  # the first turn waits for the MCP servers
            "CROSSTALK_HOME": str(crosstalk_home),
        }
        claude = str(bin_dir() / "claude")
        if install:  # the README's set-up line
            subprocess.run(
                [str(CROSSTALK), "install", "claude"], env=env, cwd=cwd, check=True, capture_output=True, timeout=60
            )
        argv = [
            claude, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
            "--dangerously-skip-permissions", "--model", CLAUDE_MODEL,
        ]  # fmt: skip
        with open(root / "claude.out", "wb") as out, open(root / "claude.err", "wb") as err:
            proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True
            )
        return cls(root, env, mock, proc, cwd)

    def close(self) -> None:
        """End the session (stdin closed: Claude exits), then its process group, then the mock."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.mock.stop()

    def __enter__(self) -> LiveClaude:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ driving it
    def say(self, text: str) -> None:
        """One user turn on stdin (stream-json)."""
        assert self.proc.stdin is not None and self.proc.poll() is None, self.tail()
        line = {"type": "user", "message": {"role": "user", "content": text}}
        self.proc.stdin.write((json.dumps(line) + "\n").encode())
        self.proc.stdin.flush()
        self._said += 1

    def requests(self) -> list[RecordedRequest]:
        return self.mock.model_requests()

    def requests_with(self, needle: str) -> list[RecordedRequest]:
        return [r for r in self.requests() if needle in r.raw]

    def wait_seen(self, needle: str, timeout: float = WAIT_S, after: int = 0) -> RecordedRequest:
        """The first model request (from index `after` on) that carried `needle`."""
        deadline = time.monotonic() + timeout
        while True:
            for req in self.requests()[after:]:
                if needle in req.raw:
                    return req
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.root.name}'s model never saw {needle!r}\n{self.tail()}")
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.root.name}'s claude exited {self.proc.returncode}\n{self.tail()}")
            time.sleep(0.02)

    def wait_tool_result(self, tool: str, timeout: float = WAIT_S) -> dict[str, Any]:
        """The JSON result of the newest call of crosstalk tool `tool`, as the model read it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for req in reversed(self.requests()):
                found = tool_result(req, f"mcp__crosstalk__{tool}")
                if found is not None:
                    return found
            time.sleep(0.02)
        raise AssertionError(f"{self.root.name}: no result of {tool} reached the model\n{self.tail()}")

    # ------------------------------------------------------------------ what it is
    @property
    def pid(self) -> int:
        return self.proc.pid

    def record(self) -> dict[str, Any] | None:
        path = Path(self.env["CLAUDE_CONFIG_DIR"]) / "sessions" / f"{self.pid}.json"
        with contextlib.suppress(OSError, ValueError):
            return json.loads(path.read_text())
        return None

    def agent(self, timeout: float = WAIT_S) -> Descriptor:
        """This session's crosstalk agent (its descriptor), once its shim registered it."""
        paths = StatePaths(Path(self.env["CROSSTALK_HOME"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in list_descriptors(paths):
                if d.harness == "claude" and d.harness_pid == self.pid:
                    return d
            time.sleep(0.05)
        raise AssertionError(f"{self.root.name} has no crosstalk agent\n{self.tail()}")

    def tail(self) -> str:
        err = (self.root / "claude.err").read_text(errors="replace")[-1500:]
        out = (self.root / "claude.out").read_text(errors="replace")[-1500:]
        return f"--- stderr\n{err}\n--- stdout\n{out}"


def tool_result(req: RecordedRequest, tool: str) -> dict[str, Any] | None:
    """The parsed result of the last `tool` call whose result this request carries, or None."""
    messages = req.body.get("messages") or []
    ids = {
        b.get("id")
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == tool
    }
    found = None
    for m in messages:
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in ids:
                content = b.get("content")
                text = content if isinstance(content, str) else "".join(
                    x.get("text", "") for x in content or [] if isinstance(x, dict)
                )
                with contextlib.suppress(ValueError):  # Claude may append <system-reminder> blocks after it
                    found = json.JSONDecoder().raw_decode(text.lstrip())[0]
    return found


@contextlib.contextmanager
def sessions(root: Path, *names: str, **options: dict[str, Any]) -> Iterator[dict[str, LiveClaude]]:
    """Start a live session per name under root, sharing root/claude as the Claude config dir and root/xt as
    CROSSTALK_HOME (options per name: `install=False` for one without crosstalk); close them all."""
    started: dict[str, LiveClaude] = {}
    try:
        for name in names:
            opts = {"config_dir": root / "claude", **options.get(name, {})}
            started[name] = LiveClaude.start(root / name, crosstalk_home=root / "xt", **opts)
        yield started
    finally:
        for s in reversed(list(started.values())):
            s.close()
