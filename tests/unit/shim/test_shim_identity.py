"""Identity per request: Codex _meta.threadId, the Claude registry record of the parent pid (re-read on every
call), the fake's _meta session; no evidence → None."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.shim.identity import identify, preferred_name, resolve_identity
from crosstalk.shim.router import CallContext

pytestmark = pytest.mark.unit
PID = 4242


@pytest.fixture
def claude_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
    (root / "sessions").mkdir()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def record(claude_dir: Path, pid: int, **fields: object) -> None:
    body = {"pid": pid, "cwd": "/w", "status": "idle", **fields}
    (claude_dir / "sessions" / f"{pid}.json").write_text(json.dumps(body))


def test_codex_thread_id():
    c = CallContext(meta={"threadId": "019a-t1", "sessionId": "other"})
    assert identify("codex", c, {}) == ("codex", "019a-t1")
    assert preferred_name("codex", c, {}) is None  # Codex gives no name: fallback naming applies
    assert identify("codex", CallContext(meta={}), {}) is None
    assert identify("codex", CallContext(meta={"threadId": ""}), {}) is None
    assert identify("codex", CallContext(meta={"threadId": 7}), {}) is None


def test_claude_record_is_read_afresh_on_every_call(claude_dir: Path):
    env = {"CLAUDE_CONFIG_DIR": str(claude_dir)}
    c = CallContext(parent_pid=PID)
    assert identify("claude", c, env) is None  # no record: no evidence
    record(claude_dir, PID, sessionId="sess-1", name="planner")
    assert identify("claude", c, env) == ("claude", "sess-1")
    assert preferred_name("claude", c, env) == "planner"
    ident = resolve_identity("claude", c, env)
    assert ident is not None and ident.harness_pid == PID
    record(claude_dir, PID, sessionId="sess-2")  # /clear: same process, a new session
    assert identify("claude", c, env) == ("claude", "sess-2")
    assert preferred_name("claude", c, env) is None
    assert identify("claude", CallContext(parent_pid=PID + 1), env) is None  # another process's record is not ours
    assert identify("claude", CallContext(parent_pid=0), env) is None


@pytest.mark.parametrize("body", ["{not json", "[]", '{"sessionId": ""}', '{"sessionId": 5}', '{"name": "x"}'])
def test_claude_unreadable_record_is_no_evidence(claude_dir: Path, body: str):
    (claude_dir / "sessions" / f"{PID}.json").write_text(body)
    assert identify("claude", CallContext(parent_pid=PID), {"CLAUDE_CONFIG_DIR": str(claude_dir)}) is None


def test_claude_default_config_dir_is_home_dot_claude(claude_dir: Path):
    home = claude_dir / "home"
    (home / ".claude" / "sessions").mkdir(parents=True)
    (home / ".claude" / "sessions" / f"{PID}.json").write_text(json.dumps({"sessionId": "s-home"}))
    assert identify("claude", CallContext(parent_pid=PID), {"HOME": str(home)}) == ("claude", "s-home")


def test_fake_session_and_name():
    c = CallContext(meta={"crosstalk/session": "s1", "crosstalk/name": "alice"})
    assert identify("fake", c, {}) == ("fake", "s1")
    assert preferred_name("fake", c, {}) == "alice"
    assert identify("fake", CallContext(meta={"crosstalk/name": "alice"}), {}) is None


def test_auto_prefers_codex_evidence_then_claude(claude_dir: Path):
    env = {"CLAUDE_CONFIG_DIR": str(claude_dir)}
    record(claude_dir, PID, sessionId="sess-c")
    both = CallContext(meta={"threadId": "t-9"}, parent_pid=PID)
    assert identify("auto", both, env) == ("codex", "t-9")
    assert identify("auto", CallContext(parent_pid=PID), env) == ("claude", "sess-c")
    assert identify("auto", CallContext(parent_pid=PID + 1), env) is None
    assert identify("auto", CallContext(meta={"crosstalk/session": "s"}), env) is None  # fake evidence is test-only


def test_unknown_harness_is_an_error():
    with pytest.raises(ValueError, match="unknown harness"):
        identify("gemini", CallContext(), {})
