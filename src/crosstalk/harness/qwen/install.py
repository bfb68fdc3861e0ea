"""`crosstalk install qwen`: `crosstalk mcp` in Qwen Code's `mcpServers` setting, and crosstalk's seven tools in
`tools.visible`. Idempotent: an install that finds everything in place writes nothing.

    scope user     $QWEN_HOME/settings.json (else ~/.qwen/settings.json)
    scope project  <cwd>/.qwen/settings.json

    "mcpServers": {"crosstalk": {"command": <absolute path>, "args": ["mcp", "--harness", "qwen"], "env"?: {...}}}
    "tools": {"visible": [..., "mcp__crosstalk__send_message", ...]}

Qwen 0.24.4 defers every MCP tool behind its `tool_search`/`tool_call` bridge, so a model would not see crosstalk's
tools until it searched for them. `tools.visible` (merged as a union across scopes) declares the seven up front and
leaves the user's `tools.toolSearch` as it is: disabling tool search would change how every other tool loads.

A clean undo (fs/install_undo.py): uninstall puts the file's bytes from before the install back, byte for byte, when
the file is still as crosstalk left it. When the user (or Qwen) changed it since, uninstall removes only crosstalk's
entries, and the containers they were the only content of.
A settings file that is not a JSON object is an error naming it, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.fs.config_edit import json_bytes, json_object, update
from crosstalk.fs.errors import ConfigRefused
from crosstalk.harness.base import ConfigChange
from crosstalk.harness.config_files import drop_entry, drop_items, install_edit, uninstall_edit
from crosstalk.harness.errors import InstallError
from crosstalk.harness.qwen.sessions import qwen_home

SERVER = "crosstalk"
SCOPES = ("user", "project")
TOOLS = ("list_agents", "send_message", "ask", "reply", "receive_message", "claim", "release")
VISIBLE = tuple(f"mcp__{SERVER}__{t}" for t in TOOLS)
MAX_SETTINGS_BYTES = 16 * 1024 * 1024


def settings_file(scope: str, environ: Mapping[str, str], cwd: Path) -> Path:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} (expected one of: {', '.join(SCOPES)})")
    return cwd / ".qwen" / "settings.json" if scope == "project" else qwen_home(environ) / "settings.json"


def entry(command: Sequence[str], extra_env: Mapping[str, str] | None) -> dict[str, Any]:
    wanted: dict[str, Any] = {"command": command[0], "args": [*command[1:], "--harness", "qwen"]}
    if extra_env:
        wanted["env"] = dict(extra_env)
    return wanted


def install(
    scope: str, command: Sequence[str], environ: Mapping[str, str], cwd: Path,
    extra_env: Mapping[str, str] | None = None,
) -> list[ConfigChange]:  # fmt: skip
    path = settings_file(scope, environ, cwd)
    wanted = entry(command, extra_env)

    def add(raw: bytes | None) -> bytes | None:
        settings = _parse(path, raw)
        servers = settings.setdefault("mcpServers", {})
        tools = settings.setdefault("tools", {})
        if not isinstance(servers, dict) or not isinstance(tools, dict):
            raise InstallError(f"{path}: mcpServers or tools is not a JSON object; fix it, then install again")
        visible = tools.setdefault("visible", [])
        if not isinstance(visible, list):
            raise InstallError(f"{path}: tools.visible is not a list; fix it, then install again")
        if servers.get(SERVER) == wanted and all(t in visible for t in VISIBLE):
            return raw
        servers[SERVER] = wanted
        visible.extend(t for t in VISIBLE if t not in visible)
        return json_bytes(settings)

    return [install_edit(path, environ, lambda edit: _edit(path, edit), add)]


def uninstall(scope: str, environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    path = settings_file(scope, environ, cwd)

    def remove(raw: bytes | None) -> bytes | None:
        if raw is None:
            return None
        settings = _parse(path, raw)
        changed = drop_entry(settings, "mcpServers", SERVER)
        tools = settings.get("tools")
        if isinstance(tools, dict) and drop_items(tools, "visible", lambda t: t in VISIBLE):
            changed = True
            if not tools:
                del settings["tools"]
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
