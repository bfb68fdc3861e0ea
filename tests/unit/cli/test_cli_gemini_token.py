"""`crosstalk gemini token`: the token of the calling Gemini session's own agent (the process above it, its hook
record, the agent serving that session in that process), else a placeholder no agent takes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crosstalk.cli import gemini_cmd
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.gemini.sessions import RUN_DIR_ENV, write_record
from crosstalk.registry import discovery
from crosstalk.registry.credentials import create_key
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.paths import StatePaths

ME = os.getpid()  # stands for the Gemini process: the test runs the lookup from "its child"


def agent(agent_id: str, session: str, harness_pid: int, harness: str = "gemini") -> Descriptor:
    return Descriptor(
        agent_id=agent_id, name=f"gemini-x-{agent_id[:4]}", harness=harness, pid=ME,
        started_at=proc_start_time(ME) or "0", harness_pid=harness_pid, cwd="/", session_ref=session,
        uds_path="/nonexistent", instance_id="i" * 16, registered_at="2026-12-04T00:00:00Z",
    )  # fmt: skip


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, str], StatePaths, list[Descriptor]]:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("CROSSTALK_HOME", str(tmp_path / "xt"))
    paths = StatePaths.from_env()
    paths.credentials.mkdir(parents=True, exist_ok=True)
    live: list[Descriptor] = []
    monkeypatch.setattr(discovery, "list_descriptors", lambda p, **kw: list(live))
    return {RUN_DIR_ENV: str(run)}, paths, live


def test_the_calling_sessions_own_agent_token(world):
    environ, paths, live = world
    assert write_record(Path(environ[RUN_DIR_ENV]), ME, "ses-1", "/", "BeforeAgent")
    mine = create_key(paths.token_path("a" * 16))
    create_key(paths.token_path("b" * 16))
    live += [agent("b" * 16, "ses-2", ME), agent("c" * 16, "ses-1", ME + 1), agent("a" * 16, "ses-1", ME)]
    assert gemini_cmd.session_token(environ, ME) == mine


def test_no_record_or_no_agent_of_that_session_in_that_process_is_no_token(world):
    environ, paths, live = world
    assert gemini_cmd.session_token(environ, ME) is None  # no hook record for this process
    write_record(Path(environ[RUN_DIR_ENV]), ME, "ses-1", "/", "SessionStart")
    create_key(paths.token_path("b" * 16))
    live += [agent("b" * 16, "ses-2", ME), agent("c" * 16, "ses-1", ME + 1), agent("d" * 16, "ses-1", ME, "qwen")]
    assert gemini_cmd.session_token(environ, ME) is None


def test_the_command_prints_a_placeholder_without_an_agent(world, capsys, monkeypatch):
    environ, _, _ = world
    monkeypatch.setenv(RUN_DIR_ENV, environ[RUN_DIR_ENV])
    assert gemini_cmd.run_token(None) == 0
    out = capsys.readouterr()
    assert out.out == gemini_cmd.NO_AGENT_YET + "\n" and "first crosstalk tool call" in out.err
