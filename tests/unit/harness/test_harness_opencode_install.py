"""`crosstalk install opencode`: the plugin and `crosstalk mcp` in opencode.json, idempotent, and `uninstall` gives
the user's file back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crosstalk.harness.errors import InstallError
from crosstalk.harness.opencode import install

CMD = ["/opt/crosstalk/bin/crosstalk", "mcp"]
USER = b'{\n  "model": "anthropic/claude",   "plugin": ["opencode-wakatime"],\n  "mcp": {"x": {"type": "remote"}}\n}\n'


def env(tmp: Path) -> dict[str, str]:
    return {"HOME": str(tmp / "home"), "CROSSTALK_HOME": str(tmp / "xt")}


def config(tmp: Path) -> Path:
    return tmp / "home" / ".config" / "opencode" / "opencode.json"


def test_install_is_idempotent_and_uninstall_restores_the_bytes(tmp_path: Path) -> None:
    path = config(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(USER)
    assert [c.action for c in install.install("user", CMD, env(tmp_path), tmp_path)] == ["updated"]
    data = json.loads(path.read_bytes())
    assert data["mcp"]["crosstalk"] == {"type": "local", "command": [*CMD, "--harness", "opencode"]}
    assert data["mcp"]["x"] == {"type": "remote"} and data["model"] == "anthropic/claude"
    assert data["plugin"] == ["opencode-wakatime", install.plugin_spec()]
    assert install.plugin_file().is_file() and install.plugin_spec().startswith("file:///")
    written = path.read_bytes()
    assert [c.action for c in install.install("user", CMD, env(tmp_path), tmp_path)] == ["unchanged"]
    assert path.read_bytes() == written
    assert [c.action for c in install.uninstall("user", env(tmp_path), tmp_path)] == ["restored"]
    assert path.read_bytes() == USER
    assert [c.action for c in install.uninstall("user", env(tmp_path), tmp_path)] == ["absent"]


def test_uninstall_after_the_user_changed_the_file_removes_only_crosstalks_entries(tmp_path: Path) -> None:
    install.install("project", CMD, env(tmp_path), tmp_path, {"CROSSTALK_HOME": "/x"})
    path = tmp_path / "opencode.json"
    data = json.loads(path.read_bytes())
    assert data["mcp"]["crosstalk"]["environment"] == {"CROSSTALK_HOME": "/x"}
    data["theme"] = "dark"
    path.write_text(json.dumps(data))
    install.uninstall("project", env(tmp_path), tmp_path)
    assert json.loads(path.read_bytes()) == {"theme": "dark"}


def test_a_file_crosstalk_created_is_removed_with_its_directory(tmp_path: Path) -> None:
    e = {**env(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    path = tmp_path / "cfg" / "opencode" / "opencode.json"
    assert [c.action for c in install.install("user", CMD, e, tmp_path)] == ["created"] and path.is_file()
    assert [c.action for c in install.uninstall("user", e, tmp_path)] == ["removed"]
    assert not path.exists() and not path.parent.exists()


def test_a_config_that_is_not_a_json_object_is_an_error_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "opencode.json"
    path.write_bytes(b'{"model": "x", // a comment\n}')
    with pytest.raises(InstallError):
        install.install("project", CMD, env(tmp_path), tmp_path)
    assert path.read_bytes() == b'{"model": "x", // a comment\n}'
