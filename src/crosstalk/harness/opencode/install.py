"""`crosstalk install opencode`: crosstalk's plugin in OpenCode's `plugin` list and `crosstalk mcp` in its `mcp`.
Idempotent: an install that finds everything in place writes nothing.

    scope user     $XDG_CONFIG_HOME/opencode/opencode.json (else ~/.config/opencode/opencode.json)
    scope project  <cwd>/opencode.json

    "plugin": [..., "file:///<this installation>/crosstalk/harness/opencode/plugin/crosstalk.js"]
    "mcp": {"crosstalk": {"type": "local", "command": [<absolute path>, "mcp", "--harness", "opencode"],
                          "environment"?: {...}}}

The plugin is `integrations/opencode/crosstalk.js` of a source checkout, or the copy a wheel carries next to this
module. It imports nothing but node builtins, so OpenCode's own first-start `npm install @opencode-ai/plugin` into
its config directories is not something it needs (docs/opencode.md says what offline machines see).

A clean undo (fs/install_undo.py): uninstall puts the file's bytes from before the install back, byte for byte, when
the file is still as crosstalk left it. When the user (or OpenCode) changed it since, uninstall removes only
crosstalk's entries, and the containers they were the only content of. A config file that is not a JSON object
(comments included: JSONC) is an error naming it, and nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.fs.config_edit import json_bytes, json_object, update
from crosstalk.fs.errors import ConfigRefused
from crosstalk.harness.base import ConfigChange
from crosstalk.harness.config_files import drop_entry, drop_items, install_edit, uninstall_edit
from crosstalk.harness.errors import InstallError

SERVER = "crosstalk"
SCOPES = ("user", "project")
MAX_SETTINGS_BYTES = 16 * 1024 * 1024


def plugin_file() -> Path:
    """crosstalk's OpenCode plugin in this installation."""
    here = Path(__file__).resolve()
    for candidate in (here.with_name("plugin") / "crosstalk.js", here.parents[4] / "integrations" / "opencode" /
                      "crosstalk.js"):  # fmt: skip
        if candidate.is_file():
            return candidate
    raise InstallError("crosstalk's OpenCode plugin is missing from this installation (integrations/opencode)")


def plugin_spec() -> str:
    return plugin_file().as_uri()


def settings_file(scope: str, environ: Mapping[str, str], cwd: Path) -> Path:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} (expected one of: {', '.join(SCOPES)})")
    if scope == "project":
        return cwd / "opencode.json"
    xdg = environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(environ.get("HOME") or Path.home()) / ".config"
    return base / "opencode" / "opencode.json"


def entry(command: Sequence[str], extra_env: Mapping[str, str] | None) -> dict[str, Any]:
    wanted: dict[str, Any] = {"type": "local", "command": [*command, "--harness", "opencode"]}
    if extra_env:
        wanted["environment"] = dict(extra_env)
    return wanted


def install(
    scope: str, command: Sequence[str], environ: Mapping[str, str], cwd: Path,
    extra_env: Mapping[str, str] | None = None,
) -> list[ConfigChange]:  # fmt: skip
    path = settings_file(scope, environ, cwd)
    wanted = entry(command, extra_env)
    spec = plugin_spec()

    def add(raw: bytes | None) -> bytes | None:
        settings = _parse(path, raw)
        servers = settings.setdefault("mcp", {})
        plugins = settings.setdefault("plugin", [])
        if not isinstance(servers, dict) or not isinstance(plugins, list):
            raise InstallError(f"{path}: mcp is not a JSON object or plugin not a list; fix it, then install again")
        if servers.get(SERVER) == wanted and spec in plugins:
            return raw
        servers[SERVER] = wanted
        if spec not in plugins:
            plugins.append(spec)
        return json_bytes(settings)

    return [install_edit(path, environ, lambda edit: _edit(path, edit), add)]


def uninstall(scope: str, environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    path = settings_file(scope, environ, cwd)

    def remove(raw: bytes | None) -> bytes | None:
        if raw is None:
            return None
        settings = _parse(path, raw)
        changed = drop_entry(settings, "mcp", SERVER)
        changed = drop_items(settings, "plugin", is_ours) or changed
        return json_bytes(settings) if changed else raw

    done = uninstall_edit(path, environ, lambda edit: _edit(path, edit), remove)
    return [done] if done is not None else []


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


def is_ours(spec: object) -> bool:
    """A plugin entry naming crosstalk's plugin file (this installation's, or another crosstalk's: same name)."""
    ends = ("/integrations/opencode/crosstalk.js", "/harness/opencode/plugin/crosstalk.js")
    return isinstance(spec, str) and spec.startswith("file://") and spec.endswith(ends)
