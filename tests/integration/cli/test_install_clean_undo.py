"""`install` then `uninstall` of every harness leaves HOME as it was, byte for byte: the files a user had (one-line
JSON, comments, modes), and no file or directory crosstalk made. Run as a user runs it: the CLI, a HOME of its own."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk import harness as kinds
from tests.support.procs import CROSSTALK

HARNESSES = kinds.installable()


@pytest.fixture
def home() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="xt-undo"))
    try:
        (base / "home").mkdir()
        yield base / "home"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _env(home: Path) -> dict[str, str]:
    drop = ("CROSSTALK_HOME", "XDG_STATE_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "QWEN_HOME", "PI_CODING_AGENT_DIR")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "HOME": str(home)}


def _cli(home: Path, *args: str) -> str:
    res = subprocess.run([str(CROSSTALK), *args], env=_env(home), cwd=home, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, (args, res.stderr)
    return res.stdout


def _snapshot(home: Path) -> dict[str, tuple[int, str]]:
    """Every path under HOME but crosstalk's own state root: its mode, and a regular file's sha256."""
    out = {}
    state = home / ".local" / "state" / "crosstalk"
    for path in sorted(home.rglob("*")):
        if path == state or state in path.parents:
            continue
        st = path.lstat()
        data = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else ""
        out[str(path.relative_to(home))] = (st.st_mode, data)
    return out


def _users_files(home: Path) -> None:
    (home / ".claude.json").write_text('{"theme":"dark","numStartups":3,"mcpServers":{"other":{"command":"x"}}}')
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text('# mine\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n')
    (home / ".pi" / "agent").mkdir(parents=True)
    (home / ".pi" / "agent" / "settings.json").write_text('{"defaultModel":"x"}')
    os.chmod(home / ".pi" / "agent" / "settings.json", 0o640)
    (home / ".qwen").mkdir()
    (home / ".qwen" / "settings.json").write_text('{\n\t"model": {"name": "qwen3-coder"}\n}')
    (home / ".claude" / "skills").mkdir(parents=True)


@pytest.mark.parametrize("order", ["as installed", "reversed"])
@pytest.mark.parametrize("start", ["empty home", "the user's own files"])
def test_install_twice_then_uninstall_leaves_home_byte_for_byte(home: Path, start: str, order: str) -> None:
    if start != "empty home":
        _users_files(home)
    before = _snapshot(home)
    for harness in HARNESSES:
        _cli(home, "install", harness)
        assert _cli(home, "install", harness).startswith("already installed"), harness  # idempotent
    assert _snapshot(home) != before
    undo = HARNESSES if order == "as installed" else HARNESSES[::-1]
    said = {harness: _cli(home, "uninstall", harness) for harness in undo}
    assert _snapshot(home) == before
    text = "".join(said.values())
    assert " updated " not in text and " absent " not in text, text  # each file restored or removed, and said so
    if start != "empty home":
        assert f"restored  {home / '.claude.json'}" in said["claude"]
    else:
        assert f"removed   {home / '.claude.json'}" in said["claude"]
    state = home / ".local" / "state" / "crosstalk"
    assert not (state / "install-undo").exists() and not (state / "installs.json").exists()
