"""The receiving user's `crossSessionInbound`, read where Claude Code reads settings, first source winning; and
Claude's receipts parsed as hostile input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.harness.claude import inbound
from crosstalk.harness.claude.inbound import inbound_setting
from crosstalk.harness.claude.receipts import parse


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_the_first_source_that_sets_it_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbound, "MANAGED", tmp_path / "managed.json")
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    cwd = tmp_path / "project"
    me = os.getpid()  # no --settings on pytest's command line
    assert inbound_setting(me, str(cwd), env) is None
    write(tmp_path / "cfg" / "settings.json", {"crossSessionInbound": "accept"})
    assert inbound_setting(me, str(cwd), env) == "accept"
    write(cwd / ".claude" / "settings.json", {"crossSessionInbound": "hold"})
    assert inbound_setting(me, str(cwd), env) == "hold"
    write(cwd / ".claude" / "settings.local.json", {"crossSessionInbound": "refuse"})
    assert inbound_setting(me, str(cwd), env) == "refuse"
    write(tmp_path / "managed.json", {"crossSessionInbound": "accept"})
    assert inbound_setting(me, str(cwd), env) == "accept"
    write(tmp_path / "managed.json", {"crossSessionInbound": "bogus"})  # not a value Claude knows: no evidence
    assert inbound_setting(me, str(cwd), env) == "refuse"


def test_unreadable_or_hostile_settings_are_no_evidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbound, "MANAGED", tmp_path / "managed.json")
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text("[" * 100_000)
    assert inbound_setting(os.getpid(), None, {"CLAUDE_CONFIG_DIR": str(cfg)}) is None
    (cfg / "settings.json").unlink()
    os.mkfifo(cfg / "settings.json")  # never blocks
    assert inbound_setting(os.getpid(), None, {"CLAUDE_CONFIG_DIR": str(cfg)}) is None


@given(st.binary(max_size=2000))
def test_any_bytes_on_the_receipt_socket_parse_to_receipts_or_nothing(raw: bytes) -> None:
    for receipt in parse(raw):
        assert isinstance(receipt.message_id, str) and isinstance(receipt.status, str)


def test_receipts_are_read_from_the_lines_that_are_receipts() -> None:
    good = {"type": "control", "action": "peer_message_status", "status": "held", "orig_msg_id": "m1"}
    raw = b"\n".join(
        [b'{"type":"auth","token":"t"}', b"[" * 50_000, json.dumps(good).encode(), b'{"action":"peer_message_status"}']
    )
    [receipt] = parse(raw)
    assert (receipt.message_id, receipt.status, receipt.refused) == ("m1", "held", False)


def test_the_sessions_settings_argument_file_or_inline_and_an_edit_to_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbound, "MANAGED", tmp_path / "managed.json")
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    write(tmp_path / "cfg" / "settings.json", {"crossSessionInbound": "accept"})
    given = tmp_path / "given.json"
    write(given, {"crossSessionInbound": "hold"})
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    by_file = subprocess.Popen([*sleeper, "--settings", str(given)])
    inline = subprocess.Popen([*sleeper, '--settings={"crossSessionInbound": "refuse"}'])
    try:
        for proc in (by_file, inline):  # Popen returns as exec closes its pipe, a moment before the arguments are set
            deadline = time.monotonic() + 10
            while b"--settings" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                assert time.monotonic() < deadline, "the child's command line never showed --settings"
                time.sleep(0.001)
        assert inbound_setting(by_file.pid, None, env) == "hold"
        write(given, {"crossSessionInbound": "nope"})  # its file edited, obeyed at once: no value, so the next source
        assert inbound_setting(by_file.pid, None, env) == "accept"
        assert inbound_setting(inline.pid, None, env) == "refuse"
        assert inbound_setting(inline.pid, None, env) == "refuse"  # the command line, kept for that process
    finally:
        for proc in (by_file, inline):
            proc.kill()
            proc.wait(timeout=10)
    assert inbound_setting(by_file.pid, None, env) == "accept"  # gone: no command line to read
