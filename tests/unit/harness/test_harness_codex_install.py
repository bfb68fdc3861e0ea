"""`crosstalk install codex`: the [mcp_servers.crosstalk] entry in $CODEX_HOME/config.toml, the user's other
settings and comments kept byte for byte, idempotent, carrying what Codex's environment filter would drop."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from crosstalk.harness.codex import KIND
from crosstalk.harness.codex.install import InstallError

CMD = ["/opt/xt/bin/crosstalk", "mcp"]
USER = '# my settings\nmodel = "o4"  # keep me\n\n[profiles.fast]\nmodel = "x" # and me\n'


def test_the_entry_is_added_with_everything_else_kept_and_a_second_install_changes_nothing(tmp_path: Path):
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(USER)
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path / "h")}
    changes = KIND.install("user", CMD, env, str(tmp_path), {"CROSSTALK_HOME": "/x/state"})
    assert [c.action for c in changes] == ["updated"]
    text = (home / "config.toml").read_text()
    assert text.startswith(USER)  # byte for byte
    entry = tomlkit.parse(text)["mcp_servers"]["crosstalk"]
    assert entry["command"] == CMD[0] and entry["args"] == ["mcp", "--harness", "codex"]
    assert dict(entry["env"]) == {"CROSSTALK_HOME": "/x/state", "CODEX_HOME": str(home)}  # past the env filter
    before = (home / "config.toml").stat().st_mtime_ns
    again = KIND.install("user", CMD, env, str(tmp_path), {"CROSSTALK_HOME": "/x/state"})
    assert [c.action for c in again] == ["unchanged"] and (home / "config.toml").stat().st_mtime_ns == before
    assert [c.action for c in KIND.uninstall("user", env, str(tmp_path))] == ["restored"]  # byte for byte
    assert (home / "config.toml").read_text() == USER


def test_defaults_need_no_env_and_a_new_config_is_created(tmp_path: Path):
    env = {"HOME": str(tmp_path)}
    assert [c.action for c in KIND.install("user", CMD, env, str(tmp_path), {})] == ["created"]
    entry = tomlkit.parse((tmp_path / ".codex" / "config.toml").read_text())["mcp_servers"]["crosstalk"]
    assert "env" not in entry


@pytest.mark.parametrize("body", ["model = ", "mcp_servers = 3\n"])
def test_a_broken_config_is_refused_and_left_alone(tmp_path: Path, body: str):
    (tmp_path / "config.toml").write_text(body)
    with pytest.raises(InstallError, match=r"config\.toml"):
        KIND.install("user", CMD, {"CODEX_HOME": str(tmp_path)}, str(tmp_path), {})
    assert (tmp_path / "config.toml").read_text() == body
    with pytest.raises(InstallError, match="unknown scope"):
        KIND.install("project", CMD, {"CODEX_HOME": str(tmp_path)}, str(tmp_path), {})
