"""Live Claude Code sessions for the e2e tests: the real `claude` (pinned), with crosstalk set up the README way
(`crosstalk install claude`: the MCP entry and the skill), each session with its own HOME, runtime dir and mock
Anthropic server; the sessions of one test share one Claude config dir (as one user's sessions share ~/.claude:
Claude's own ListAgents and SendMessage see each other) and one CROSSTALK_HOME.

- `LiveClaude`: headless and long-lived (`-p --input-format stream-json`, stdin held open: one turn per user line,
  socket-injected turns in between). It runs with bypass permissions unless told otherwise (`permission_mode`
  "default" or "plan": PERMISSION_FLAGS), optionally with `settings` (`--settings <json>`) and a `name` (`--name`).
  The test is its stream-json host: it sends control requests (`control`), answers permission prompts
  (`allow_tool`) and reads the messages the session holds for its user (`holds`).
- `TuiClaude`: the interactive TUI in a tmux session (keys typed with send-keys, the screen read with capture-pane).

    with sessions(root, "alpha", "beta") as live:
        live["beta"].say("CALL mcp__crosstalk__list_agents {}")
        live["beta"].wait_seen("...")               # the model request that carried it
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from crosstalk.demo.claude_session import tool_result, tool_result_ids, tool_result_texts
from crosstalk.demo.models import RecordedRequest, ScriptedAnthropic
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import list_descriptors
from crosstalk.registry.paths import StatePaths
from tests.support.tmux_pane import TmuxPane

REPO = Path(__file__).resolve().parents[2]
CROSSTALK = REPO / ".venv" / "bin" / "crosstalk"
CLAUDE_MODEL = "claude-sonnet-4-6"
WAIT_S = 60.0
STOP_S = 20.0
# How each permission mode is asked for on the command line. In default mode a crosstalk tool call would ask for
# permission, which nobody answers in -p mode: crosstalk's tools are allowed up front, as a user would. Plan mode
# asks whatever the allowed tools ("Cannot call mcp__crosstalk__... while in plan mode"): its prompts come to the
# test as `can_use_tool` control requests (`--permission-prompt-tool stdio`), answered with `allow_tool`.
PERMISSION_FLAGS = {
    "bypass": ["--dangerously-skip-permissions"],
    "default": ["--permission-mode", "default", "--allowedTools", "mcp__crosstalk"],
    "plan": ["--permission-mode", "plan", "--allowedTools", "mcp__crosstalk", "--permission-prompt-tool", "stdio"],
}


def bin_dir() -> Path:
    return Path(os.environ.get("CROSSTALK_E2E_BIN") or REPO / ".harnesses" / "node_modules" / ".bin")


def prepare(
    root: Path, crosstalk_home: Path, config_dir: Path | None, install: bool, *, tui: bool = False
) -> tuple[dict[str, str], Path, ScriptedAnthropic]:
    """The session's dirs, environment (nothing of the caller's but PATH) and mock; crosstalk set up if `install`."""
    config = config_dir or root / "home" / ".claude"
    config.mkdir(parents=True, exist_ok=True)
    for sub in ("home", "tmp", "run"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "run").chmod(0o700)
    cwd = root / root.name
    cwd.mkdir(exist_ok=True)
    mock = ScriptedAnthropic().start()
    env = {
        "PATH": os.pathsep.join([str(bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color" if tui else "dumb",
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
    if not tui:
        env["NO_COLOR"] = "1"
    if tui:  # the TUI asks nothing at start: onboarding done, the key approved, the directory trusted
        _seed_config(config / ".claude.json", cwd)
    if install:  # the README's set-up line
        subprocess.run(
            [str(CROSSTALK), "install", "claude"], env=env, cwd=cwd, check=True, capture_output=True, timeout=60
        )
    return env, cwd, mock


def _seed_config(path: Path, cwd: Path) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("hasCompletedOnboarding", True)
    data.setdefault("customApiKeyResponses", {"approved": ["dummy"], "rejected": []})
    data.setdefault("projects", {}).setdefault(str(cwd), {})["hasTrustDialogAccepted"] = True
    path.write_text(json.dumps(data, indent=2))


class Session:
    """What the tests ask of a live session, however it runs."""

    def __init__(self, root: Path, env: dict[str, str], mock: ScriptedAnthropic, cwd: Path) -> None:
        self.root, self.env, self.mock, self.cwd = root, env, mock, cwd

    pid: int

    def say(self, text: str) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def tail(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ what its model saw
    def requests(self) -> list[RecordedRequest]:
        return self.mock.model_requests()

    def requests_with(self, needle: str) -> list[RecordedRequest]:
        return [r for r in self.requests() if needle in r.raw]

    def wait_seen(self, needle: str, timeout: float = WAIT_S, after: int = 0) -> RecordedRequest:
        """The first model request (from index `after` on) that carried `needle`."""

        def what() -> str:
            gone = "'s claude exited" if not self.alive() else f"'s model never saw {needle!r}"
            return f"{self.root.name}{gone}\n{self.tail()}"

        return self.mock.wait_seen(needle, after=after, timeout=timeout, what=what, alive=self.alive)

    def _newest_result(self, tool: str, after: int, timeout: float, pick: Callable[..., Any]) -> Any:
        """`pick(request, tool name, skip)` of the newest request (from index `after` on) it finds something in,
        or None after `timeout`. Every request repeats the conversation, so the results an earlier request (before
        `after`) already carried are skipped: they are an earlier call's, never the one waited for."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            requests = self.requests()
            seen = frozenset(i for r in requests[:after] for i in tool_result_ids(r))
            for req in reversed(requests[after:]):
                found = pick(req, f"mcp__crosstalk__{tool}", seen)
                if found is not None:
                    return found
            time.sleep(0.02)
        return None

    def wait_tool_text(self, tool: str, timeout: float = WAIT_S, after: int = 0) -> str:
        """The raw text of the newest result of crosstalk tool `tool` the model read (in a request from index
        `after` on): crosstalk's JSON, or Claude's own error for the call."""
        text = self._newest_result(tool, after, timeout, lambda *a: next(reversed(tool_result_texts(*a)), None))
        if text is None:
            raise AssertionError(f"{self.root.name}: no result of {tool} reached the model\n{self.tail()}")
        return str(text)

    def wait_tool_result(self, tool: str, timeout: float = WAIT_S, after: int = 0) -> dict[str, Any]:
        """The JSON result of the newest call of crosstalk tool `tool`, as the model read it (in a request from
        index `after` on)."""
        found = self._newest_result(tool, after, timeout, tool_result)
        if found is not None:
            return found
        # What did reach it, if anything: Claude's own answer for the call (an MCP error) is not crosstalk's JSON.
        seen = [t[:300] for r in self.requests()[after:] for t in tool_result_texts(r, f"mcp__crosstalk__{tool}")]
        raise AssertionError(f"{self.root.name}: no result of {tool} reached the model (results seen: {seen[-3:]})\n"
                             f"{self.tail()}")  # fmt: skip

    # ------------------------------------------------------------------ what it is
    def record(self) -> dict[str, Any] | None:
        path = Path(self.env["CLAUDE_CONFIG_DIR"]) / "sessions" / f"{self.pid}.json"
        with contextlib.suppress(OSError, ValueError):
            return json.loads(path.read_text())
        return None

    def agent(self, timeout: float = WAIT_S) -> Descriptor:
        """The crosstalk agent of this session's current session id (its descriptor), once its shim registered it."""
        paths = StatePaths(Path(self.env["CROSSTALK_HOME"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ref = (self.record() or {}).get("sessionId")
            for d in list_descriptors(paths):
                if d.harness == "claude" and d.harness_pid == self.pid and d.session_ref == ref:
                    return d
            time.sleep(0.05)
        raise AssertionError(f"{self.root.name} has no crosstalk agent\n{self.tail()}")


class LiveClaude(Session):
    def __init__(
        self,
        root: Path,
        env: dict[str, str],
        mock: ScriptedAnthropic,
        cwd: Path,
        proc: Any,
        flags: list[str] | None = None,
        permission_mode: str = "bypass",
    ) -> None:
        super().__init__(root, env, mock, cwd)
        self.proc: subprocess.Popen[bytes] = proc
        self.pid = proc.pid
        self.flags = list(PERMISSION_FLAGS["bypass"] if flags is None else flags)  # restart() starts it alike
        self.permission_mode = permission_mode
        self._request_ids = itertools.count(1)
        self._sent: list[dict[str, Any]] = []  # every line written on its stdin (the host's side), oldest first

    @classmethod
    def start(
        cls,
        root: Path,
        *,
        crosstalk_home: Path,
        config_dir: Path | None = None,
        install: bool = True,
        mcp_servers: dict[str, dict[str, Any]] | None = None,
        permission_mode: str = "bypass",
        settings: dict[str, Any] | None = None,
        name: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> LiveClaude:
        """A session in `root` (cwd `root/<basename>`, Claude config dir `config_dir`, default its own), crosstalk
        set up for it; with `install` false, a session without crosstalk: it loads no MCP server at all
        (`--strict-mcp-config`), though the config dir it shares may list crosstalk for the other sessions.
        `mcp_servers`: more user-scope MCP servers for it (the benchmarks' bare baselines). `permission_mode`:
        "bypass" (`--dangerously-skip-permissions`), "default" or "plan" (PERMISSION_FLAGS); `settings`: more
        settings for this session alone (`--settings <json>`, e.g. {"crossSessionInbound": "hold"}); `name`: the
        session's name (`--name`); `extra_env`: more environment (QWEN_HOME, to share one user's Qwen sessions)."""
        if permission_mode not in PERMISSION_FLAGS:
            raise ValueError(f"permission_mode {permission_mode!r}: expected one of {sorted(PERMISSION_FLAGS)}")
        env, cwd, mock = prepare(root, crosstalk_home, config_dir, install)
        env.update(extra_env or {})
        if mcp_servers:
            path = Path(env["CLAUDE_CONFIG_DIR"]) / ".claude.json"
            data = json.loads(path.read_text()) if path.exists() else {}
            data.setdefault("mcpServers", {}).update(mcp_servers)
            path.write_text(json.dumps(data, indent=2))
        flags = list(PERMISSION_FLAGS[permission_mode])
        if settings is not None:
            flags += ["--settings", json.dumps(settings)]
        if name is not None:
            flags += ["--name", name]
        if not install:
            flags.append("--strict-mcp-config")
        return cls(root, env, mock, cwd, _spawn(root, env, cwd, [], "wb", flags), flags, permission_mode)

    def restart(self) -> None:
        """End the session's process and start `claude --resume <its session id>` in its place (same mock)."""
        session_id = (self.record() or {}).get("sessionId")
        assert session_id, self.tail()
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(STOP_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)
        self.proc = _spawn(self.root, self.env, self.cwd, ["--resume", session_id], "ab", self.flags)
        self.pid = self.proc.pid

    def say(self, text: str) -> None:
        """One user turn on stdin (stream-json)."""
        self._write({"type": "user", "message": {"role": "user", "content": text}})

    def _write(self, line: dict[str, Any]) -> None:
        """One JSON line on the session's stdin."""
        assert self.proc.stdin is not None and self.alive(), self.tail()
        self.proc.stdin.write((json.dumps(line) + "\n").encode())
        self.proc.stdin.flush()
        self._sent.append(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    # ------------------------------------------------------------------ the stream-json host's side
    def events(self) -> list[dict[str, Any]]:
        """Every JSON line the session wrote on stdout so far (claude.out), oldest first; a torn last line is left
        out until it is complete."""
        data = (self.root / "claude.out").read_bytes()
        out: list[dict[str, Any]] = []
        for line in data[: data.rfind(b"\n") + 1].splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    out.append(event)
        return out

    def control(self, request: dict[str, Any], timeout: float = WAIT_S) -> dict[str, Any]:
        """Send one control request on stdin (as an SDK host does) and return its answer: the `response` object of
        the matching `control_response` line on stdout (`subtype` "success" with its own `response`, or "error"
        with `error`)."""
        request_id = f"xt-{os.getpid()}-{next(self._request_ids)}"
        line = {"type": "control_request", "request_id": request_id, "request": request}
        self._write(line)
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events():
                response = event.get("response")
                if (
                    event.get("type") == "control_response"
                    and isinstance(response, dict)
                    and response.get("request_id") == request_id
                ):
                    return response
            assert time.monotonic() < deadline and self.alive(), f"no answer to {line}\n{self.tail()}"
            time.sleep(0.05)

    def allow_tool(self, tool: str, timeout: float = WAIT_S) -> dict[str, Any]:
        """Answer the session's permission prompt for `tool` (a `can_use_tool` control request on stdout, which a
        plan-mode session sends for crosstalk's tools) with allow, as its user would; returns the request."""
        answered = {e["response"]["request_id"] for e in self._sent if e.get("type") == "control_response"}
        deadline = time.monotonic() + timeout
        while True:
            asked = next(
                (
                    e
                    for e in self.events()
                    if e.get("type") == "control_request"
                    and e.get("request", {}).get("subtype") == "can_use_tool"
                    and e.get("request", {}).get("tool_name") == tool
                    and e.get("request_id") not in answered
                ),
                None,
            )
            if asked is not None:
                break
            assert time.monotonic() < deadline and self.alive(), (
                f"{self.root.name} never asked for {tool}\n{self.tail()}"
            )
            time.sleep(0.05)
        response = {"behavior": "allow", "updatedInput": asked["request"].get("input", {})}
        self._write(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": asked["request_id"], "response": response},
            }
        )
        return asked

    def holds(self) -> list[dict[str, Any]]:
        """The session's `peer_message_hold` system events so far, oldest first: a message held for its user
        (`state` "held", with its `hold_id`, `cause` and a `preview` of the text), then what became of it (e.g.
        "released" once let through)."""
        return [e for e in self.events() if e.get("type") == "system" and e.get("subtype") == "peer_message_hold"]

    def wait_hold(
        self, predicate: Callable[[dict[str, Any]], object] = bool, timeout: float = WAIT_S
    ) -> dict[str, Any]:
        """The first `peer_message_hold` event `predicate` holds for, waiting up to `timeout` s for it."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((h for h in self.holds() if predicate(h)), None)
            if found is not None:
                return found
            assert time.monotonic() < deadline and self.alive(), f"{self.root.name} held no such message\n{self.tail()}"
            time.sleep(0.05)

    def shim_pids(self) -> list[int]:
        """The pids of the `crosstalk mcp` processes (crosstalk's shims) the Claude process started, read from /proc."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                ppid = int(stat[stat.rindex(")") + 2 :].split()[1])  # after "pid (comm) state"
                children.setdefault(ppid, []).append(int(entry.name))
        found: list[int] = []
        todo = list(children.get(self.pid, []))
        while todo:  # every descendant: Claude may start a server through a wrapper
            pid = todo.pop()
            todo.extend(children.get(pid, []))
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                if any(Path(a).name == "crosstalk" for a in argv) and "mcp" in argv:
                    found.append(pid)
        return sorted(found)

    def close(self) -> None:
        """End the session (stdin closed: Claude exits), then its process group, then the mock."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(STOP_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.mock.stop()

    def tail(self) -> str:
        err = (self.root / "claude.err").read_text(errors="replace")[-1500:]
        out = (self.root / "claude.out").read_text(errors="replace")[-1500:]
        return f"--- stderr\n{err}\n--- stdout\n{out}"


def _spawn(
    root: Path, env: dict[str, str], cwd: Path, extra: list[str], mode: str, flags: list[str] | None = None
) -> subprocess.Popen[bytes]:
    """`flags`: the session's permission mode and settings (default: bypass permissions, PERMISSION_FLAGS)."""
    flags = PERMISSION_FLAGS["bypass"] if flags is None else flags
    argv = [
        str(bin_dir() / "claude"), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
        "--verbose", *flags, "--model", CLAUDE_MODEL, *extra,
    ]  # fmt: skip
    with open(root / "claude.out", mode) as out, open(root / "claude.err", mode) as err:
        return subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True
        )


class TuiClaude(Session):
    """The interactive TUI in a tmux server of its own (tests/support/tmux_pane.py)."""

    def __init__(self, root: Path, env: dict[str, str], mock: ScriptedAnthropic, cwd: Path, pane: TmuxPane) -> None:
        super().__init__(root, env, mock, cwd)
        self.pane = pane
        self.pid = int(pane.tmux("display-message", "-p", "-t", pane.name, "#{pane_pid}").strip())

    @classmethod
    def start(cls, root: Path, *, crosstalk_home: Path, config_dir: Path | None = None) -> TuiClaude:
        env, cwd, mock = prepare(root, crosstalk_home, config_dir, True, tui=True)
        # `env -i` + the session's environment: the TUI sees exactly what the headless sessions see.
        cmd = " ".join(["exec env -i", *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                        shlex.quote(str(bin_dir() / "claude")), "--model", CLAUDE_MODEL,
                        "--allowedTools", "mcp__crosstalk"])  # fmt: skip
        pane = TmuxPane(f"xt-{root.name}")
        pane.start(cmd, str(cwd))
        session = cls(root, env, mock, cwd, pane)
        deadline = time.monotonic() + WAIT_S
        while "❯" not in session.screen():  # the prompt is up
            assert time.monotonic() < deadline, f"the TUI did not start\n{session.tail()}"
            time.sleep(0.1)
        return session

    def screen(self) -> str:
        return self.pane.screen()

    def say(self, text: str) -> None:
        self.pane.say(text)

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def close(self) -> None:
        self.pane.close()
        deadline = time.monotonic() + STOP_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)
        self.mock.stop()

    def tail(self) -> str:
        return f"--- screen\n{self.screen()}"


@contextlib.contextmanager
def sessions(root: Path, *names: str, **options: dict[str, Any]) -> Iterator[dict[str, Session]]:
    """Start a live session per name under root, sharing root/claude as the Claude config dir and root/xt as
    CROSSTALK_HOME; options per name: `tui=True` for the interactive TUI in tmux, `install=False` for a session
    without crosstalk, and LiveClaude.start's keywords (`permission_mode="default"`, `settings={...}`,
    `name="..."`). Close them all, whatever happens."""
    started: dict[str, Session] = {}
    try:
        for name in names:
            opts = dict(options.get(name, {}))
            if opts.pop("tui", False):
                started[name] = TuiClaude.start(root / name, crosstalk_home=root / "xt", config_dir=root / "claude")
            else:
                opts.setdefault("config_dir", root / "claude")
                started[name] = LiveClaude.start(root / name, crosstalk_home=root / "xt", **opts)
        yield started
    finally:
        for s in reversed(list(started.values())):
            s.close()
