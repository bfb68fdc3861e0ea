"""End-to-end fixtures: the REAL harness CLIs (claude, codex, pi: pinned, installed by scripts/install_harnesses.sh
into .harnesses/) run one-shot against local mock model servers (crosstalk.demo.models), each in an isolated HOME.

Binaries come from $CROSSTALK_E2E_BIN, else <repo>/.harnesses/node_modules/.bin. A missing binary skips the test,
or fails it when CROSSTALK_E2E_REQUIRED=1 (scripts/dev.sh sets that once the install succeeded).

    def test_x(harness_run):
        run = harness_run("codex")                 # HarnessRun(name, argv_prefix, env, mock, cwd, home)
        proc = run.run("hello")                    # argv_prefix + ["hello"], stdin closed, killed on timeout
        assert run.mock.replies[-1] in proc.stdout
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from crosstalk.demo.models import ScriptedAnthropic, ScriptedChat, ScriptedModelServer, ScriptedResponses
from crosstalk.demo.models.wiring import MODEL, write_codex_config, write_pi_models
from tests.support.harness_run import HarnessRun
from tests.support.live_claude import bin_dir

REPO = Path(__file__).resolve().parents[2]
HARNESSES = ("claude", "codex", "pi")
# A model id Claude Code knows (an unknown id works too, but prints a context-window warning on stderr).
CLAUDE_MODEL = "claude-sonnet-4-6"
MOCK_MODEL = MODEL  # the model id the Codex and pi configs name (crosstalk.demo.models.wiring)


def make_tmp() -> Path:
    """A short temp dir (unix socket paths stay well under 108 bytes)."""
    return Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))


e2e_bin_dir = bin_dir  # one place says where the pinned CLIs are (tests/support/live_claude.py)


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CROSSTALK_E2E_REQUIRED") == "1":
        pytest.fail(f"{reason} (CROSSTALK_E2E_REQUIRED=1)", pytrace=False)
    pytest.skip(f"{reason}; run `bash scripts/install_harnesses.sh` or set CROSSTALK_E2E_BIN")


def harness_binary(name: str) -> Path:
    """The harness executable, or skip (fail when required) with a reason naming where it was looked for."""
    path = e2e_bin_dir() / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        _unavailable(f"e2e harness binary {name!r} not found at {path}")
    if name in ("codex", "pi") and shutil.which("node") is None:
        _unavailable(f"{name} needs node on PATH")
    return path


def base_env(root: Path) -> dict[str, str]:
    """A minimal environment (nothing inherited but PATH): no API keys or session variables of the caller leak in."""
    home, tmp = root / "home", root / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    path = os.pathsep.join([str(e2e_bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")])
    return {"PATH": path, "HOME": str(home), "TMPDIR": str(tmp), "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1"}


def claude_setup(root: Path, mock: ScriptedModelServer) -> tuple[list[str], dict[str, str]]:
    env = base_env(root)
    run_dir = root / "run"  # Claude's messaging socket goes to $XDG_RUNTIME_DIR/cc-socks/<pid>.sock
    run_dir.mkdir(mode=0o700, exist_ok=True)
    env.update(
        {
            "CLAUDE_CONFIG_DIR": str(root / "home" / ".claude"),
            "XDG_RUNTIME_DIR": str(run_dir),
            "ANTHROPIC_BASE_URL": mock.base_url,
            "ANTHROPIC_API_KEY": "dummy",
            "IS_SANDBOX": "1",  # lets root use --dangerously-skip-permissions
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
    )
    argv = [str(harness_binary("claude")), "-p", "--dangerously-skip-permissions", "--model", CLAUDE_MODEL, "--"]
    return argv, env


def codex_setup(root: Path, mock: ScriptedModelServer) -> tuple[list[str], dict[str, str]]:
    env = base_env(root)
    codex_home = root / "home" / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    write_codex_config(codex_home, mock.base_url, provider="mock", key_env="MOCK_API_KEY")
    env.update({"CODEX_HOME": str(codex_home), "MOCK_API_KEY": "dummy"})
    # exec refuses to run outside a git repo or trusted dir without --skip-git-repo-check. stdout carries only the
    # final agent message; the banner, the echoed prompt and warnings go to stderr.
    argv = [str(harness_binary("codex")), "exec", "--skip-git-repo-check", "--color", "never", "--"]
    return argv, env


def pi_setup(root: Path, mock: ScriptedModelServer) -> tuple[list[str], dict[str, str]]:
    env = base_env(root)
    agent_dir = root / "home" / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    write_pi_models(agent_dir, mock.base_url, provider="mock")
    env.update({"PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", "PI_TELEMETRY": "0"})
    argv = [str(harness_binary("pi")), "-p", "--provider", "mock", "--model", MOCK_MODEL]
    return argv, env


Setup = Callable[[Path, ScriptedModelServer], tuple[list[str], dict[str, str]]]
# harness -> (its mock fixture, its setup, prompt starts that cannot go on argv)
SETUPS: dict[str, tuple[str, Setup, tuple[str, ...]]] = {
    "claude": ("mock_anthropic", claude_setup, ()),
    "codex": ("mock_responses", codex_setup, ()),
    "pi": ("mock_chat", pi_setup, ("-", "@")),
}


def _serve(mock: ScriptedModelServer) -> Iterator[ScriptedModelServer]:
    mock.start()
    try:
        yield mock
    finally:
        mock.stop()


@pytest.fixture
def mock_anthropic() -> Iterator[ScriptedModelServer]:
    yield from _serve(ScriptedAnthropic())


@pytest.fixture
def mock_responses() -> Iterator[ScriptedModelServer]:
    yield from _serve(ScriptedResponses())


@pytest.fixture
def mock_chat() -> Iterator[ScriptedModelServer]:
    yield from _serve(ScriptedChat())


@pytest.fixture
def harness_run(request: pytest.FixtureRequest) -> Iterator[Callable[..., HarnessRun]]:
    """Factory: `harness_run(name, reply=None)` → a HarnessRun for "claude", "codex" or "pi", wired to this test's
    mock fixture for that API (started on first use) in a fresh temp root that is removed afterwards."""
    roots: list[Path] = []

    def make(name: str, reply: str | None = None) -> HarnessRun:
        if name not in SETUPS:
            raise ValueError(f"unknown harness {name!r}; expected one of {HARNESSES}")
        fixture, setup, unsafe = SETUPS[name]
        harness_binary(name)
        mock: ScriptedModelServer = request.getfixturevalue(fixture)
        if reply is not None:
            mock.reply = reply
        root = make_tmp()
        roots.append(root)
        argv, env = setup(root, mock)
        cwd = root / "work"
        cwd.mkdir()
        return HarnessRun(name, argv, env, mock, cwd, root / "home", unsafe)

    yield make
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def live_root() -> Iterator[Path]:
    """A short temp root for the live-session tests (tests/e2e/test_*_live.py), removed afterwards."""
    root = make_tmp()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def require() -> Callable[[str], Path]:
    """`require("codex")`: the pinned harness binary, or skip (fail when the run requires the CLIs)."""
    return harness_binary
