"""The state-root check between a shim and the harness that started it (shim/environment.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from crosstalk.registry.paths import StatePaths
from crosstalk.shim.environment import process_environ, state_root_mismatch

pytestmark = pytest.mark.unit


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


def test_a_process_environment_is_read_as_it_was_started():
    env = {"PATH": "/usr/bin:/bin", "CROSSTALK_HOME": "/somewhere/xt", "ODD": "a=b"}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        deadline = time.monotonic() + 10
        while (got := process_environ(proc.pid)) is None or "CROSSTALK_HOME" not in got:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert got["CROSSTALK_HOME"] == "/somewhere/xt" and got["ODD"] == "a=b"
    finally:
        proc.kill()
        proc.wait(10)
    assert process_environ(999_999_999) is None
