"""Session records a harness wrote (or someone planted) are shown safe and never hide real ones: `crosstalk list`,
list_agents' rows and watch's cells escape control characters and cap a name's length (core/display.py); a record
naming another user's process is not a session; junk files that sort first never push a real record out."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.display import NAME_CHARS, for_display
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.claude.sessions import MAX_RECORDS, live_records
from crosstalk.shim.listing import agent_rows
from crosstalk.watch.records import MessageView
from crosstalk.watch.rows import traffic_row
from tests.support.procs import Agent, Procs, one_error_line

EVIL = "\x1b]0;owned\x07\x1b[2J" + "line\nforged row\r" + "x" * 200_000  # under the record cap (256 KiB)


def _record(root: Path, pid: int, **fields: object) -> None:
    sessions = root / "claude" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    body = {"pid": pid, "sessionId": f"s-{pid}", "procStart": proc_start_time(pid), "status": "idle", **fields}
    (sessions / f"{pid}.json").write_text(json.dumps(body))


def test_list_and_list_agents_show_a_hostile_session_name_escaped_and_capped(xt: Procs) -> None:
    _record(xt.root, os.getpid(), name=EVIL, cwd="/w\x1b[1m")
    res = xt.cli("list")
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\r" not in res.stdout
    assert len(res.stdout) < 2000 and len(res.stdout.splitlines()) == 2  # the header and one row
    [row] = json.loads(xt.cli("list", "--json").stdout)
    assert row["name"] == for_display(EVIL) and len(row["name"]) == NAME_CHARS and "\x1b" not in row["cwd"]
    [shim_row] = agent_rows(xt.paths, xt.env, None)
    assert shim_row["name"] == for_display(EVIL) and shim_row["cwd"] == "/w\\x1b[1m"


def test_watch_cells_escape_a_sender_and_text() -> None:
    m = MessageView(
        message_id="m", at=0.0, to="bob", to_agent_id="b" * 16, sender=EVIL, sender_class="external",
        kind="inform", state="accepted", reason=None, latency_s=None, transport="uds", text="hi\x1b[31m",
    )  # fmt: skip
    cells = traffic_row(m)
    assert all("\x1b" not in c and "\n" not in c for c in cells) and len(cells[1]) == NAME_CHARS


@given(st.text(max_size=300), st.integers(min_value=1, max_value=100))
def test_for_display_is_one_safe_line_within_the_cap(text: str, limit: int) -> None:
    shown = for_display(text, limit)
    assert (len(shown) <= limit and shown.isprintable()) or not any(ord(c) < 0x20 or ord(c) == 0x7F for c in shown)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in shown)
    if len(text) <= limit and text.isprintable() and text.isascii():
        assert shown == text


@pytest.mark.skipif(os.geteuid() != 0, reason="starting another user's process needs root")
def test_a_record_naming_another_users_process_is_not_a_session(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "60"], user=65534, group=65534)
    try:
        _record(tmp_path, other.pid, name="theirs")
        assert os.stat(f"/proc/{other.pid}").st_uid == 65534
        assert list(live_records({"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})) == []
    finally:
        other.kill()
        other.wait(5)


def test_junk_that_sorts_first_never_hides_a_real_record(tmp_path: Path) -> None:
    sessions = tmp_path / "claude" / "sessions"
    sessions.mkdir(parents=True)
    for i in range(MAX_RECORDS + 1000):  # names that sort before any pid's
        (sessions / f"0000junk{i:05d}.json").write_text("{}")
    for i in range(MAX_RECORDS + 1000):  # record-shaped names of processes that do not exist, sorting first too
        (sessions / f"1{i:07d}0000000.json").write_text("{}")
    _record(tmp_path, os.getpid(), name="real")
    assert [pid for pid, _ in live_records({"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})] == [os.getpid()]


def test_a_session_record_naming_an_agents_socket_is_refused_not_accepted(xt: Procs, alice: Agent) -> None:
    """A planted Claude session record routes `bob` into alice's own socket: refused, clearly; alice gets nothing."""
    _record(xt.root, os.getpid(), name="bob", messagingSocketPath=str(xt.paths.uds_path(alice.agent_id)))
    res = xt.cli("send", "bob", "hello")
    assert res.returncode != 0 and "accepted" not in res.stdout, (res.stdout, res.stderr)
    line = one_error_line(res.stderr)
    assert "native:crosstalk_socket" in line and "crosstalk agent's socket" in line, line
    assert alice.inbox_lines() == []
