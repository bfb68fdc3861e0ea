"""`crosstalk install claude`: the MCP entry `claude mcp add -s user` writes, and the skill; idempotent to the byte,
other settings kept, a broken config refused with nothing written, and undone by uninstall."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from crosstalk.harness.claude import KIND
from crosstalk.harness.claude.install import SKILL, InstallError

CMD = ["/opt/xt/bin/crosstalk", "mcp"]
ENTRY = {"type": "stdio", "command": "/opt/xt/bin/crosstalk", "args": ["mcp"], "env": {}}


def env(tmp_path: Path) -> dict[str, str]:
    return {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"), "HOME": str(tmp_path / "home")}


def actions(changes) -> list[str]:
    return [c.action for c in changes]


def test_user_scope_honours_claude_config_dir_and_a_second_install_changes_no_byte(tmp_path: Path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / ".claude.json").write_text(json.dumps({"userID": "u", "mcpServers": {"other": {"command": "x"}}}))
    os.chmod(cfg / ".claude.json", 0o600)
    assert actions(KIND.install("user", CMD, env(tmp_path), str(tmp_path))) == ["updated", "created"]
    data = json.loads((cfg / ".claude.json").read_text())
    assert data == {"userID": "u", "mcpServers": {"other": {"command": "x"}, "crosstalk": ENTRY}}
    assert stat.S_IMODE(os.stat(cfg / ".claude.json").st_mode) == 0o600
    assert (cfg / "skills" / "crosstalk" / "SKILL.md").read_bytes() == SKILL.read_bytes()
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in cfg.rglob("*") if p.is_file()}
    assert actions(KIND.install("user", CMD, env(tmp_path), str(tmp_path))) == ["unchanged", "unchanged"]
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in cfg.rglob("*") if p.is_file()} == before


def test_without_claude_config_dir_it_is_home_dot_claude_json_and_the_skill_under_home_dot_claude(tmp_path: Path):
    e = {"HOME": str(tmp_path / "home")}
    KIND.install("user", CMD, e, str(tmp_path))
    assert json.loads((tmp_path / "home" / ".claude.json").read_text())["mcpServers"]["crosstalk"] == ENTRY
    assert (tmp_path / "home" / ".claude" / "skills" / "crosstalk" / "SKILL.md").is_file()


def test_project_scope_writes_mcp_json_and_a_project_skill(tmp_path: Path):
    KIND.install("project", CMD, env(tmp_path), str(tmp_path))
    assert json.loads((tmp_path / ".mcp.json").read_text()) == {"mcpServers": {"crosstalk": ENTRY}}
    assert (tmp_path / ".claude" / "skills" / "crosstalk" / "SKILL.md").is_file()
    assert not (tmp_path / "cfg").exists()  # the user's config is not touched


@pytest.mark.parametrize("body", ["{broken", "[]", '{"mcpServers": []}'])
def test_a_broken_config_is_refused_and_nothing_is_written(tmp_path: Path, body: str):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / ".claude.json").write_text(body)
    with pytest.raises(InstallError, match=r"\.claude\.json"):
        KIND.install("user", CMD, env(tmp_path), str(tmp_path))
    assert (tmp_path / "cfg" / ".claude.json").read_text() == body
    assert not (tmp_path / "cfg" / "skills").exists()


def test_a_symlinked_config_is_refused(tmp_path: Path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "cfg" / ".claude.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(InstallError, match="symlink"):
        KIND.install("user", CMD, env(tmp_path), str(tmp_path))
    assert (tmp_path / "real.json").read_text() == "{}"


def test_uninstall_removes_only_crosstalk(tmp_path: Path):
    KIND.install("user", CMD, env(tmp_path), str(tmp_path))
    path = tmp_path / "cfg" / ".claude.json"
    data = json.loads(path.read_text())
    data["mcpServers"]["other"] = {"command": "x"}
    path.write_text(json.dumps(data))
    assert actions(KIND.uninstall("user", env(tmp_path), str(tmp_path))) == ["updated", "removed"]
    assert json.loads(path.read_text()) == {"mcpServers": {"other": {"command": "x"}}}
    assert not (tmp_path / "cfg" / "skills" / "crosstalk").exists()
    assert actions(KIND.uninstall("user", env(tmp_path), str(tmp_path))) == ["absent", "absent"]
    with pytest.raises(InstallError, match="unknown scope"):
        KIND.install("global", CMD, env(tmp_path), str(tmp_path))
