"""fs/trace.py: benchmark timestamps are off unless the trace file exists, and then one whole JSON line each."""

from __future__ import annotations

import json

import pytest

from crosstalk.fs import trace


@pytest.fixture
def fresh(monkeypatch):
    """The module as a new process finds it: not yet checked."""
    monkeypatch.setattr(trace, "_checked", False)
    monkeypatch.setattr(trace, "_fd", None)
    yield
    if trace._fd is not None:
        import os

        os.close(trace._fd)


def test_off_without_the_file(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSTALK_HOME", str(tmp_path))
    trace.mark("tool_call", tool="send_message")
    assert not trace.enabled()
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_off_without_a_state_root(fresh, monkeypatch):
    monkeypatch.delenv("CROSSTALK_HOME", raising=False)
    trace.mark("tool_call")
    assert not trace.enabled()


def test_on_when_the_file_exists(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSTALK_HOME", str(tmp_path))
    path = tmp_path / trace.FILE_NAME
    path.touch()
    trace.mark("tool_call", tool="send_message")
    trace.mark("harness_write", harness="claude")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["ev"], e.get("tool"), e.get("harness")) for e in lines] == [
        ("tool_call", "send_message", None),
        ("harness_write", None, "claude"),
    ]
    assert lines[0]["t"] <= lines[1]["t"] and all(isinstance(e["pid"], int) for e in lines)
