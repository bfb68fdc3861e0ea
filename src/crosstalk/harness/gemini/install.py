"""`crosstalk install gemini`: `crosstalk mcp` in Gemini CLI's `mcpServers`, and crosstalk's hook on the four events
it uses. Idempotent: an install that finds everything in place writes nothing.

    scope user     $GEMINI_CLI_HOME/.gemini/settings.json (else ~/.gemini/settings.json)
    scope project  <cwd>/.gemini/settings.json

    "mcpServers": {"crosstalk": {"command": <absolute path>, "args": ["mcp", "--harness", "gemini"], "trust": true,
                                 "env"?: {...}}}
    "hooks": {"SessionStart"|"BeforeAgent"|"AfterTool"|"AfterAgent": [..., {"matcher"?: ".*",
              "hooks": [{"name": "crosstalk", "type": "command", "command": "<python> -m crosstalk.harness.gemini.hook
              <Event>", "timeout": 10000}]}]}

`trust: true` lets the model call crosstalk's tools without a confirmation per call (the user chose to install it).
A clean undo (fs/install_undo.py): uninstall puts the file's bytes from before the install back, byte for byte, when
the file is still as crosstalk left it. When the user (or Gemini) changed it since, uninstall removes only
crosstalk's entries, and the containers they were the only content of. A settings file that is not a JSON object
is an error naming it, and nothing is written.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.fs.config_edit import json_bytes, json_object, update
from crosstalk.fs.errors import ConfigRefused
from crosstalk.harness.base import ConfigChange
from crosstalk.harness.config_files import drop_entry, drop_items, install_edit, uninstall_edit
from crosstalk.harness.errors import InstallError

SERVER = "crosstalk"
SCOPES = ("user", "project")
EVENTS = ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent")
HOOK_TIMEOUT_MS = 10000
MAX_SETTINGS_BYTES = 16 * 1024 * 1024


def gemini_dir(environ: Mapping[str, str]) -> Path:
    home = environ.get("GEMINI_CLI_HOME") or environ.get("HOME") or str(Path.home())
    return Path(home).expanduser() / ".gemini"


def settings_file(scope: str, environ: Mapping[str, str], cwd: Path) -> Path:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} (expected one of: {', '.join(SCOPES)})")
    return cwd / ".gemini" / "settings.json" if scope == "project" else gemini_dir(environ) / "settings.json"


def entry(command: Sequence[str], extra_env: Mapping[str, str] | None) -> dict[str, Any]:
    wanted: dict[str, Any] = {"command": command[0], "args": [*command[1:], "--harness", "gemini"], "trust": True}
    if extra_env:
        wanted["env"] = dict(extra_env)
    return wanted


def hook_group(event: str, python: str) -> dict[str, Any]:
    hook = {"name": SERVER, "type": "command", "timeout": HOOK_TIMEOUT_MS,
            "command": f"{shlex.quote(python)} -m crosstalk.harness.gemini.hook {event}"}  # fmt: skip
    return {**({"matcher": ".*"} if event == "AfterTool" else {}), "hooks": [hook]}


def ours(group: Any) -> bool:
    """A hook group crosstalk's install added."""
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and any(isinstance(h, dict) and h.get("name") == SERVER for h in hooks)


def install(
    scope: str, command: Sequence[str], environ: Mapping[str, str], cwd: Path,
    extra_env: Mapping[str, str] | None = None, python: str | None = None,
) -> list[ConfigChange]:  # fmt: skip
    path = settings_file(scope, environ, cwd)
    wanted = entry(command, extra_env)
    groups = {event: hook_group(event, python or sys.executable) for event in EVENTS}

    def add(raw: bytes | None) -> bytes | None:
        settings = _parse(path, raw)
        servers, hooks = settings.setdefault("mcpServers", {}), settings.setdefault("hooks", {})
        if not isinstance(servers, dict) or not isinstance(hooks, dict):
            raise InstallError(f"{path}: mcpServers or hooks is not a JSON object; fix it, then install again")
        lists = {event: hooks.setdefault(event, []) for event in EVENTS}
        if not all(isinstance(v, list) for v in lists.values()):
            raise InstallError(f"{path}: a hooks entry is not a list; fix it, then install again")
        if servers.get(SERVER) == wanted and all([g for g in lists[e] if ours(g)] == [groups[e]] for e in EVENTS):
            return raw
        servers[SERVER] = wanted
        for event in EVENTS:
            lists[event][:] = [g for g in lists[event] if not ours(g)] + [groups[event]]
        return json_bytes(settings)

    return [install_edit(path, environ, lambda edit: _edit(path, edit), add)]


def uninstall(scope: str, environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    path = settings_file(scope, environ, cwd)

    def remove(raw: bytes | None) -> bytes | None:
        if raw is None:
            return None
        settings = _parse(path, raw)
        changed = drop_entry(settings, "mcpServers", SERVER)
        hooks = settings.get("hooks")
        if isinstance(hooks, dict) and any([drop_items(hooks, event, ours) for event in EVENTS]):
            changed = True
            if not hooks:
                del settings["hooks"]
        return json_bytes(settings) if changed else raw

    done = uninstall_edit(path, environ, lambda edit: _edit(path, edit), remove)
    return [done] if done is not None else []


def _edit(path: Path, edit: Callable[[bytes | None], bytes | None]) -> tuple[bytes | None, bytes | None]:
    try:
        return update(path, edit, limit=MAX_SETTINGS_BYTES)
    except ConfigRefused as exc:
        raise InstallError(str(exc)) from None


def _parse(path: Path, raw: bytes | None) -> dict[str, Any]:
    try:
        return json_object(path, raw, MAX_SETTINGS_BYTES)
    except ConfigRefused as exc:
        raise InstallError(str(exc)) from None
