"""The state-root check between a shim and the harness that started it (shim/environment.py)."""

from __future__ import annotations

from pathlib import Path

from crosstalk.fs.procinfo import process_environ
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.environment import state_root_mismatch


def test_the_same_root_by_another_spelling_is_no_mismatch(tmp_path: Path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    paths = StatePaths(tmp_path / "real")
    assert state_root_mismatch(paths, {"CROSSTALK_HOME": str(tmp_path / "link")}) is None
    assert state_root_mismatch(paths, None) is None  # nothing known of the harness: nothing claimed


def test_another_root_in_the_harness_environment_is_named_with_the_fix(tmp_path: Path):
    paths = StatePaths(tmp_path / "home" / ".local" / "state" / "crosstalk")  # the default: no CROSSTALK_HOME
    warning = state_root_mismatch(paths, {"HOME": str(tmp_path / "home"), "CROSSTALK_HOME": str(tmp_path / "xt")})
    assert warning is not None and warning.startswith("state_root_mismatch:")
    assert str(tmp_path / "xt") in warning and str(paths.root) in warning and "crosstalk install" in warning
    # and the other way round: the entry sets a root the harness's shell does not use
    assert state_root_mismatch(StatePaths(tmp_path / "xt"), {"HOME": str(tmp_path / "home")}) is not None


def test_a_process_environment_is_read_as_it_was_started(sleeper):
    env = {"PATH": "/usr/bin:/bin", "CROSSTALK_HOME": "/somewhere/xt", "ODD": "a=b"}
    pid = sleeper(env=env, ready=lambda p: "CROSSTALK_HOME" in (process_environ(p) or {}))
    got = process_environ(pid)
    assert got is not None and got["CROSSTALK_HOME"] == "/somewhere/xt" and got["ODD"] == "a=b"
    assert process_environ(999_999_999) is None
