"""`crosstalk install pi`: the crosstalk pi package in pi's settings, the way `pi install <path>` adds it, and the
core's command in the extension's config file. Idempotent: an install that finds everything in place writes nothing.

    scope user     $PI_CODING_AGENT_DIR/settings.json (else ~/.pi/agent/settings.json)  "packages": [<package dir>]
    scope project  <cwd>/.pi/settings.json
    both           $HOME/.config/pi-agent-extensions/crosstalk/config.json  "command": [<crosstalk>]

The package is `integrations/pi` of a source checkout, or the copy a wheel carries next to this module. Other
settings and other packages stay as they are; a settings file that is not a JSON object is an error naming it, and
one that is not a plain file an error naming exactly why. Each edit is replaced only if nobody (pi) wrote the file
meanwhile (fs/config_edit.py). Uninstall is a clean undo (fs/install_undo.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.fs.config_edit import json_bytes, json_object, update
from crosstalk.fs.errors import ConfigRefused
from crosstalk.harness.base import ConfigChange
from crosstalk.harness.config_files import Edit, drop_items, install_edit, uninstall_edit
from crosstalk.harness.errors import InstallError

SCOPES = ("user", "project")
MAX_SETTINGS_BYTES = 16 * 1024 * 1024
KEY = "packages"


def package_dir() -> Path:
    """The crosstalk pi package (its package.json and extensions/)."""
    here = Path(__file__).resolve()
    for candidate in (here.with_name("package"), here.parents[4] / "integrations" / "pi"):
        if (candidate / "package.json").is_file():
            return candidate
    raise InstallError("the crosstalk pi package is missing from this installation (integrations/pi)")


def _home(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME")
    return Path(home) if home else Path.home()


def settings_file(scope: str, environ: Mapping[str, str], cwd: Path) -> Path:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} (expected one of: {', '.join(SCOPES)})")
    if scope == "project":
        return cwd / ".pi" / "settings.json"
    agent_dir = environ.get("PI_CODING_AGENT_DIR")
    return (Path(agent_dir).expanduser() if agent_dir else _home(environ) / ".pi" / "agent") / "settings.json"


def config_file(environ: Mapping[str, str]) -> Path:
    return _home(environ) / ".config" / "pi-agent-extensions" / "crosstalk" / "config.json"


def install(scope: str, command: Sequence[str], environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    settings_path = settings_file(scope, environ, cwd)
    package = str(package_dir())

    def add(raw: bytes | None) -> bytes | None:
        settings = _parse(settings_path, raw)
        packages = settings.setdefault(KEY, [])
        if not isinstance(packages, list):
            raise InstallError(f"{settings_path}: {KEY!r} is not a list; fix or remove it, then install again")
        if any(_same(entry, package, settings_path) for entry in packages):
            return raw
        packages.append(package)
        return json_bytes(settings)

    config = config_file(environ)
    return [
        install_edit(settings_path, environ, lambda edit: _edit(settings_path, edit), add),
        install_edit(config, environ, lambda edit: _edit(config, edit), _put_command(config, list(command))),
    ]


def uninstall(scope: str, environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    """Undo install: each file as it was before, byte for byte, while it is as crosstalk left it; else the package
    leaves pi's settings, and the extension's config file (the user's tool flags in it) stays, `kept`."""
    settings_path = settings_file(scope, environ, cwd)
    package = str(package_dir())

    def remove(raw: bytes | None) -> bytes | None:
        if raw is None:
            return None
        settings = _parse(settings_path, raw)
        ours = drop_items(settings, KEY, lambda entry: _same(entry, package, settings_path))
        return json_bytes(settings) if ours else raw

    config = config_file(environ)
    done = [
        uninstall_edit(settings_path, environ, lambda edit: _edit(settings_path, edit), remove),
        uninstall_edit(config, environ, lambda edit: _edit(config, edit), None),  # changed by the user: `kept`
    ]
    return [c for c in done if c is not None]


def _same(entry: Any, package: str, settings_path: Path) -> bool:
    """A settings entry naming our package: a local path, absolute or relative to the settings file."""
    if not isinstance(entry, str) or ":" in entry.split("/")[0]:
        return False  # npm:…, git:…, https://…: not a local path
    path = Path(entry).expanduser()
    if not path.is_absolute():
        path = settings_path.parent / path
    return os.path.realpath(path) == os.path.realpath(package)


def _put_command(path: Path, command: list[str]) -> Edit:
    def put(raw: bytes | None) -> bytes | None:
        config = _parse(path, raw)
        if config.get("command") == command:
            return raw
        config["command"] = command
        return json_bytes(config)

    return put


def _edit(path: Path, edit: Any) -> tuple[bytes | None, bytes | None]:
    try:
        return update(path, edit, limit=MAX_SETTINGS_BYTES)
    except ConfigRefused as exc:
        raise InstallError(str(exc)) from None


def _parse(path: Path, raw: bytes | None) -> dict[str, Any]:
    try:
        return json_object(path, raw, MAX_SETTINGS_BYTES)
    except ConfigRefused as exc:
        raise InstallError(str(exc)) from None
