"""Identity per request, as the harness kinds tell it: Codex _meta.threadId, the Claude registry record of the parent
pid (re-read on every call), the fake's _meta session; no evidence → None. `auto` tries the kinds marked auto in
registry order."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk import harness as kinds
from crosstalk.harness.base import CallEvidence, SessionIdentity

PID = 4242


@pytest.fixture
def claude_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
    (root / "sessions").mkdir()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def resolve_identity(
    harness: str, meta: dict | None = None, pid: int = 0, env: dict | None = None
) -> SessionIdentity | None:
    return kinds.identify(harness, CallEvidence(meta or {}, pid, env or {}))


def identify(harness: str, meta: dict | None = None, pid: int = 0, env: dict | None = None) -> tuple[str, str] | None:
    ident = resolve_identity(harness, meta, pid, env)
    return ident.key if ident else None


def preferred_name(harness: str, meta: dict | None = None, pid: int = 0, env: dict | None = None) -> str | None:
    ident = resolve_identity(harness, meta, pid, env)
    return ident.preferred_name if ident else None


def record(claude_dir: Path, pid: int, **fields: object) -> None:
    body = {"pid": pid, "cwd": "/w", "status": "idle", **fields}
    (claude_dir / "sessions" / f"{pid}.json").write_text(json.dumps(body))


def test_codex_thread_id():
    meta = {"threadId": "019a-t1", "sessionId": "other"}
    assert identify("codex", meta) == ("codex", "019a-t1")
    assert preferred_name("codex", meta) is None  # Codex gives no name: fallback naming applies
    assert identify("codex", {}) is None
    assert identify("codex", {"threadId": ""}) is None
    assert identify("codex", {"threadId": 7}) is None


def test_claude_record_is_read_afresh_on_every_call(claude_dir: Path):
    env = {"CLAUDE_CONFIG_DIR": str(claude_dir)}
    assert identify("claude", pid=PID, env=env) is None  # no record: no evidence
    record(claude_dir, PID, sessionId="sess-1", name="planner")
    assert identify("claude", pid=PID, env=env) == ("claude", "sess-1")
    assert preferred_name("claude", pid=PID, env=env) == "planner"
    ident = resolve_identity("claude", pid=PID, env=env)
    assert ident is not None and ident.harness_pid == PID
    record(claude_dir, PID, sessionId="sess-2")  # /clear: same process, a new session
    assert identify("claude", pid=PID, env=env) == ("claude", "sess-2")
    assert preferred_name("claude", pid=PID, env=env) is None
    assert identify("claude", pid=PID + 1, env=env) is None  # another process's record is not ours
    assert identify("claude", pid=0, env=env) is None


@pytest.mark.parametrize("body", ["{not json", "[]", '{"sessionId": ""}', '{"sessionId": 5}', '{"name": "x"}'])
def test_claude_unreadable_record_is_no_evidence(claude_dir: Path, body: str):
    (claude_dir / "sessions" / f"{PID}.json").write_text(body)
    assert identify("claude", pid=PID, env={"CLAUDE_CONFIG_DIR": str(claude_dir)}) is None


def test_claude_default_config_dir_is_home_dot_claude(claude_dir: Path):
    home = claude_dir / "home"
    (home / ".claude" / "sessions").mkdir(parents=True)
    (home / ".claude" / "sessions" / f"{PID}.json").write_text(json.dumps({"sessionId": "s-home"}))
    assert identify("claude", pid=PID, env={"HOME": str(home)}) == ("claude", "s-home")


def test_fake_session_and_name():
    meta = {"crosstalk/session": "s1", "crosstalk/name": "alice"}
    assert identify("fake", meta) == ("fake", "s1")
    assert preferred_name("fake", meta) == "alice"
    assert identify("fake", {"crosstalk/name": "alice"}) is None


def test_auto_prefers_codex_evidence_then_claude(claude_dir: Path):
    env = {"CLAUDE_CONFIG_DIR": str(claude_dir)}
    record(claude_dir, PID, sessionId="sess-c")
    assert identify("auto", {"threadId": "t-9"}, PID, env) == ("codex", "t-9")
    assert identify("auto", pid=PID, env=env) == ("claude", "sess-c")
    assert identify("auto", pid=PID + 1, env=env) is None
    assert identify("auto", {"crosstalk/session": "s"}, env=env) is None  # fake evidence is test-only


def test_unknown_harness_is_an_error():
    with pytest.raises(ValueError, match="unknown harness"):
        identify("nope")
