"""Where `crosstalk demo` looks for the harness CLIs: only in --harness-bin DIR when given, else on PATH; codex and
pi need node too."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstalk.demo.harnesses import HARNESSES, HOW_TO_GET, OPTIONAL, find_harnesses
from crosstalk.doctor.pins import load_pins


def executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    bins, node = tmp_path / "bin", tmp_path / "node"
    bins.mkdir()
    node.mkdir()
    executable(node / "node")
    return bins, node


def test_all_three_in_the_given_dir_and_node_on_path(dirs: tuple[Path, Path]):
    bins, node = dirs
    for name in ("claude", "codex", "pi"):
        executable(bins / name)
    found = find_harnesses(bins, {"PATH": str(node)})
    assert found.complete and found.missing == ()
    assert found.bins == {name: bins / name for name in ("claude", "codex", "pi")}
    assert found.where == f"in {bins}" and found.path_dirs() == [str(bins)]


def test_the_given_dir_is_the_only_place_looked_at(dirs: tuple[Path, Path], tmp_path: Path):
    bins, node = dirs
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("claude", "codex", "pi"):
        executable(elsewhere / name)
    executable(bins / "claude")
    (bins / "codex").write_text("not executable")
    found = find_harnesses(bins, {"PATH": f"{elsewhere}:{node}"})
    assert not found.complete and found.missing == ("codex", "pi")


def test_without_a_dir_they_come_from_path(dirs: tuple[Path, Path], tmp_path: Path):
    _, node = dirs
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    executable(a / "claude")
    executable(b / "codex")
    executable(b / "pi")
    found = find_harnesses(None, {"PATH": f"{a}:{b}:{node}"})
    assert found.complete and found.where == "on PATH"
    assert found.path_dirs() == [str(a), str(b)]


def test_codex_and_pi_without_node_are_missing_node(dirs: tuple[Path, Path]):
    bins, _ = dirs
    for name in ("claude", "codex", "pi"):
        executable(bins / name)
    found = find_harnesses(bins, {"PATH": str(bins)})
    assert found.missing == ("node (for codex)", "node (for pi)")


def test_how_to_get_them_names_the_set_up_and_the_pinned_npm_packages():
    assert "scripts/dev.sh demo" in HOW_TO_GET
    for pin in load_pins():
        if pin.command in (*HARNESSES, *OPTIONAL):
            assert f"{pin.package}@{pin.version}" in HOW_TO_GET


def test_qwen_is_taken_when_found_and_never_missed(dirs: tuple[Path, Path]):
    """The demo adds a Qwen Code session when its CLI is there, and runs the three without it."""
    bins, node = dirs
    for name in ("claude", "codex", "pi"):
        executable(bins / name)
    without = find_harnesses(bins, {"PATH": str(node)})
    assert without.complete and "qwen" not in without.bins
    executable(bins / "qwen")
    found = find_harnesses(bins, {"PATH": str(node)})
    assert found.complete and found.bins["qwen"] == bins / "qwen"
    assert "node (for qwen)" in find_harnesses(bins, {"PATH": ""}).missing


def test_opencode_and_gemini_are_taken_when_found_and_never_missed(dirs: tuple[Path, Path]):
    """The demo adds an OpenCode and a Gemini CLI session when their CLIs are there, and runs without them; Gemini
    CLI is a node script, OpenCode a binary of its own."""
    bins, node = dirs
    for name in ("claude", "codex", "pi"):
        executable(bins / name)
    without = find_harnesses(bins, {"PATH": str(node)})
    assert without.complete and not {"opencode", "gemini"} & set(without.bins)
    executable(bins / "opencode")
    executable(bins / "gemini")
    found = find_harnesses(bins, {"PATH": str(node)})
    assert found.complete and found.bins["opencode"] == bins / "opencode" and found.bins["gemini"] == bins / "gemini"
    missing = find_harnesses(bins, {"PATH": ""}).missing
    assert "node (for gemini)" in missing and "node (for opencode)" not in missing
