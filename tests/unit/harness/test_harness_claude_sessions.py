"""Claude Code's session registry as the claude kind reads it: live records only (pid + procStart name the running
process), every read capped, no symlink followed, no FIFO blocking a listing; supersession only with the record's
proof."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.base import SessionIdentity
from crosstalk.harness.claude import KIND
from crosstalk.harness.claude.sessions import MAX_RECORD_BYTES, live_records

ME = os.getpid()


def write(root: Path, name: str, body: object) -> Path:
    (root / "sessions").mkdir(parents=True, exist_ok=True)
    path = root / "sessions" / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def record(pid: int = ME, **fields: object) -> dict[str, object]:
    return {"pid": pid, "sessionId": f"s-{pid}", "procStart": proc_start_time(pid), "status": "busy", **fields}


def env(root: Path) -> dict[str, str]:
    return {"CLAUDE_CONFIG_DIR": str(root)}


def test_a_live_record_is_discovered_with_its_status_name_and_cwd(tmp_path: Path):
    write(tmp_path, f"{ME}.json", record(name="planner", cwd="/w"))
    write(tmp_path, f"{ME}.abc123.key", {"peerToken": "t"})  # key files are not records
    [row] = KIND.discover(env(tmp_path))
    assert (row.harness, row.session_ref, row.name, row.cwd, row.status, row.pid) == (
        "claude",
        f"s-{ME}",
        "planner",
        "/w",
        "busy",
        ME,
    )
    assert row.reachable is False and row.reason == "its messaging socket is gone" and row.endpoint is None


def test_stale_records_are_not_sessions(tmp_path: Path):
    write(tmp_path, f"{ME}.json", record(procStart="1"))  # our pid, another process's start time: pid reuse
    write(tmp_path, "999999999.json", record(999999999, procStart="5"))  # no such process
    write(tmp_path, "1.json", {"pid": 1, "sessionId": "s-init"})  # no procStart: no proof it is this process
    write(tmp_path, f"{os.getppid()}.json", record(ME))  # the record names another pid than its file
    assert KIND.discover(env(tmp_path)) == []


@pytest.mark.parametrize(
    "body", ["{not json", "[]", '{"sessionId": ""}', '{"sessionId": 5}', " " * (MAX_RECORD_BYTES + 1)]
)
def test_unreadable_or_oversized_records_are_skipped(tmp_path: Path, body: str):
    write(tmp_path, f"{ME}.json", body)
    assert list(live_records(env(tmp_path))) == []


def test_a_symlink_or_fifo_under_a_record_name_is_never_read(tmp_path: Path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(record()))
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / f"{ME}.json").symlink_to(outside)
    os.mkfifo(tmp_path / "sessions" / "1.json")  # would block a plain open() forever
    assert KIND.discover(env(tmp_path)) == []


def test_no_sessions_dir_is_no_sessions(tmp_path: Path):
    assert KIND.discover(env(tmp_path / "missing")) == []


def test_superseded_needs_the_same_process_and_a_record_naming_another_session(tmp_path: Path):
    old = SessionIdentity("claude", "s-old", harness_pid=ME)
    new = SessionIdentity("claude", "s-new", harness_pid=ME)
    assert not KIND.superseded(old, new, env(tmp_path))  # no record: no proof
    write(tmp_path, f"{ME}.json", record(sessionId="s-old"))
    assert not KIND.superseded(old, new, env(tmp_path))  # the record still names the old session
    write(tmp_path, f"{ME}.json", record(sessionId="s-new"))
    assert KIND.superseded(old, new, env(tmp_path))
    elsewhere = SessionIdentity("claude", "s-new", harness_pid=ME + 1)
    assert not KIND.superseded(old, elsewhere, env(tmp_path))  # another process never supersedes
    assert not KIND.superseded(old, SessionIdentity("codex", "s-new"), env(tmp_path))


def test_a_session_without_a_name_is_given_one_that_addresses_it(tmp_path: Path):
    """The name a listing shows is the name a send finds (harness.native_sessions matches the row's name)."""
    from crosstalk import harness as kinds

    body = record()  # no "name" field
    write(tmp_path, f"{ME}.json", {**body, "sessionId": "5f0c2b1e-0000-4000-8000-00000000beef"})
    [row] = KIND.discover(env(tmp_path))
    assert row.name == "claude-0000beef"
    assert [r.session_ref for _, r in kinds.native_sessions("claude-0000beef", env(tmp_path))] == [row.session_ref]


@pytest.mark.parametrize(
    ("fields", "preferred"),
    [
        ({"name": "alpha-19", "nameSource": "derived"}, None),  # made up per process: crosstalk names the agent
        ({"name": "reviewer", "nameSource": "user"}, "reviewer"),
        ({"name": "fix-login", "nameSource": "auto"}, "fix-login"),
        ({"name": "reviewer"}, "reviewer"),
        ({}, None),
    ],
)
def test_a_derived_session_name_is_not_the_agents_preferred_name(tmp_path: Path, fields, preferred):
    from crosstalk.harness.base import CallEvidence

    write(tmp_path, f"{ME}.json", record(**fields))
    ident = KIND.identify(CallEvidence({}, ME, env(tmp_path)))
    assert ident is not None and ident.preferred_name == preferred
