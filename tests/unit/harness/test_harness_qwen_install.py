"""`crosstalk install qwen`: idempotent, and `uninstall` gives the user's settings back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crosstalk.harness.errors import InstallError
from crosstalk.harness.qwen import install

CMD = ["/opt/crosstalk/bin/crosstalk", "mcp"]
USER = b'{\n    "model": {"name": "qwen3-coder"},   "tools": {"visible": ["web_fetch"]}\n}\n'


def env(tmp: Path) -> dict[str, str]:
    return {"HOME": str(tmp / "home"), "CROSSTALK_HOME": str(tmp / "xt")}


def settings(tmp: Path) -> Path:
    return tmp / "home" / ".qwen" / "settings.json"


def test_install_is_idempotent_and_uninstall_restores_the_bytes(tmp_path: Path) -> None:
    path = settings(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(USER)
    assert [c.action for c in install.install("user", CMD, env(tmp_path), tmp_path)] == ["updated"]
    data = json.loads(path.read_bytes())
    assert data["mcpServers"]["crosstalk"] == {"command": CMD[0], "args": ["mcp", "--harness", "qwen"]}
    assert data["tools"]["visible"] == ["web_fetch", *install.VISIBLE] and data["model"] == {"name": "qwen3-coder"}
    written = path.read_bytes()
    assert [c.action for c in install.install("user", CMD, env(tmp_path), tmp_path)] == ["unchanged"]
    assert path.read_bytes() == written
    assert [c.action for c in install.uninstall("user", env(tmp_path), tmp_path)] == ["restored"]
    assert path.read_bytes() == USER
    store = tmp_path / "xt" / "install-undo"
    assert [p.name for p in store.iterdir()] == ["made-dirs.json"]  # no record left; `crosstalk uninstall` tidies


def test_uninstall_after_the_user_changed_the_file_removes_only_crosstalks_entries(tmp_path: Path) -> None:
    install.install("user", CMD, env(tmp_path), tmp_path)
    path = settings(tmp_path)
    data = json.loads(path.read_bytes())
    data["ui"] = {"theme": "dark"}
    path.write_text(json.dumps(data))
    install.uninstall("user", env(tmp_path), tmp_path)
    assert json.loads(path.read_bytes()) == {"ui": {"theme": "dark"}}


def test_a_file_crosstalk_created_is_removed(tmp_path: Path) -> None:
    assert [c.action for c in install.install("user", CMD, env(tmp_path), tmp_path)] == ["created"]
    assert [c.action for c in install.uninstall("user", env(tmp_path), tmp_path)] == ["removed"]
    assert not settings(tmp_path).exists() and not settings(tmp_path).parent.exists()  # nothing left behind
    assert [c.action for c in install.uninstall("user", env(tmp_path), tmp_path)] == ["absent"]


def test_settings_that_are_not_an_object_are_an_error_and_nothing_is_written(tmp_path: Path) -> None:
    path = settings(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"[1, 2]\n")
    with pytest.raises(InstallError, match=r"settings\.json"):
        install.install("user", CMD, env(tmp_path), tmp_path)
    assert path.read_bytes() == b"[1, 2]\n"
