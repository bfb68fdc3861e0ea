"""Publishing a crosstalk agent as a Claude peer: the record and key Claude reads, one per process, removed on
close; a crashed publisher's records pruned by pid + procStart, and nothing that is not crosstalk's ever touched."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.base import AgentInfo
from crosstalk.harness.claude import KIND
from crosstalk.harness.claude.peers import ENTRYPOINT, key_path, prune, publish

AGENT = AgentInfo("0123456789abcdef", "helper", "s-1", "/x/sock/0123456789abcdef.sock", "/w")


def test_the_record_and_key_claude_reads_and_close_removes_them(tmp_path: Path):
    undo = KIND.publish_peer(AGENT, "the-socket-key", {"config_dir": str(tmp_path)})
    assert undo is not None
    record_path = tmp_path / "sessions" / f"{os.getpid()}.json"
    record = json.loads(record_path.read_text())
    assert (record["pid"], record["name"], record["messagingSocketPath"]) == (os.getpid(), "helper", AGENT.uds_path)
    assert record["procStart"] == proc_start_time(os.getpid()) and record["entrypoint"] == ENTRYPOINT
    key = key_path(tmp_path / "sessions", os.getpid(), AGENT.uds_path)
    assert json.loads(key.read_text())["peerToken"] == "the-socket-key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(record_path.stat().st_mode) == 0o600
    assert publish(tmp_path, AGENT, "t") is None  # one peer per process
    assert KIND.discover({"CLAUDE_CONFIG_DIR": str(tmp_path)}) == []  # listed as the agent it is, not a session
    undo()
    assert list((tmp_path / "sessions").iterdir()) == []


def test_a_crashed_publishers_records_are_pruned_and_nothing_else(tmp_path: Path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    dead = {"pid": 999999999, "sessionId": "x", "procStart": "7", "entrypoint": ENTRYPOINT,
            "messagingSocketPath": "/x/a.sock"}  # fmt: skip
    (sessions / "999999999.json").write_text(json.dumps(dead))
    key_path(sessions, 999999999, "/x/a.sock").write_text("{}")
    claudes = {**dead, "entrypoint": "cli"}  # a real (stale) Claude record: Claude's to clean up, not ours
    (sessions / "999999998.json").write_text(json.dumps({**claudes, "pid": 999999998}))
    live = {**dead, "pid": os.getpid(), "procStart": proc_start_time(os.getpid())}
    (sessions / f"{os.getpid()}.json").write_text(json.dumps(live))
    removed = prune(sessions)
    assert sorted(p.name for p in removed) == sorted(
        ["999999999.json", key_path(sessions, 999999999, "/x/a.sock").name]
    )
    assert sorted(p.name for p in sessions.iterdir()) == sorted(["999999998.json", f"{os.getpid()}.json"])


def test_without_settings_nothing_is_published(tmp_path: Path):
    assert KIND.publish_peer(AGENT, "t", {}) is None
    assert KIND.peer_settings({"CLAUDE_CONFIG_DIR": str(tmp_path)}) == {"config_dir": str(tmp_path)}
