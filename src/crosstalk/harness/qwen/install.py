"""`crosstalk install qwen`: `crosstalk mcp` in Qwen Code's `mcpServers` setting, and crosstalk's seven tools in
`tools.visible`. Idempotent: an install that finds everything in place writes nothing.

    scope user     $QWEN_HOME/settings.json (else ~/.qwen/settings.json)
    scope project  <cwd>/.qwen/settings.json

    "mcpServers": {"crosstalk": {"command": <absolute path>, "args": ["mcp", "--harness", "qwen"], "env"?: {...}}}
    "tools": {"visible": [..., "mcp__crosstalk__send_message", ...]}

Qwen 0.24.4 defers every MCP tool behind its `tool_search`/`tool_call` bridge, so a model would not see crosstalk's
tools until it searched for them. `tools.visible` (merged as a union across scopes) declares the seven up front and
leaves the user's `tools.toolSearch` as it is: disabling tool search would change how every other tool loads.

A clean undo: install keeps the file's bytes from before its edit (`$CROSSTALK_HOME/qwen-install/<hash>.json`,
0600); uninstall puts them back byte for byte when the file is still as crosstalk left it. When the user (or Qwen)
changed it since, uninstall removes only crosstalk's entries, and the containers they were the only content of.
A settings file that is not a JSON object is an error naming it, and nothing is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.config_edit import json_bytes, json_object, update
from crosstalk.fs.errors import ConfigRefused
from crosstalk.fs.reading import read_capped
from crosstalk.harness.base import ConfigChange
from crosstalk.harness.errors import InstallError
from crosstalk.harness.qwen.native import crosstalk_home
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


def _backup_file(environ: Mapping[str, str], path: Path) -> Path:
    digest = hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:16]
    return crosstalk_home(environ) / "qwen-install" / f"{digest}.json"


def install(
    scope: str, command: Sequence[str], environ: Mapping[str, str], cwd: Path,
    extra_env: Mapping[str, str] | None = None,
) -> list[ConfigChange]:  # fmt: skip
    path = settings_file(scope, environ, cwd)
    wanted = entry(command, extra_env)
    had_dir = path.parent.is_dir()

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

    before, after = _edit(path, add)
    if before != after and after is not None:
        _keep(environ, path, before, after, made_dir=not had_dir)
    return [_change(path, before, after)]


def uninstall(scope: str, environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    path = settings_file(scope, environ, cwd)
    backup = _backup_file(environ, path)
    kept = _kept(backup)

    def remove(raw: bytes | None) -> bytes | None:
        if raw is None:
            return None
        if kept is not None and hashlib.sha256(raw).hexdigest() == kept.get("after"):
            original = kept.get("before")
            return original.encode() if isinstance(original, str) else None  # as it was, byte for byte
        settings = _parse(path, raw)
        servers, tools = settings.get("mcpServers"), settings.get("tools")
        changed = False
        if isinstance(servers, dict) and SERVER in servers:
            del servers[SERVER]
            changed = True
            if not servers:
                del settings["mcpServers"]
        visible = tools.get("visible") if isinstance(tools, dict) else None
        if isinstance(tools, dict) and isinstance(visible, list) and any(t in visible for t in VISIBLE):
            tools["visible"] = [t for t in visible if t not in VISIBLE]
            changed = True
            if not tools["visible"]:
                del tools["visible"]
            if not tools:
                del settings["tools"]
        return json_bytes(settings) if changed else raw

    before, after = _edit(path, remove)
    if after is None and kept is not None and kept.get("made_dir") and path.parent.is_dir():
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # the directory install made for the file, if nothing else is in it now
    backup.unlink(missing_ok=True)
    if backup.parent.is_dir() and not any(backup.parent.iterdir()):
        backup.parent.rmdir()
    change = _change(path, before, after)
    if before is not None and after is None:
        change = ConfigChange(str(path), "removed")
    return [ConfigChange(change.path, "absent") if change.action == "unchanged" else change]


def _keep(environ: Mapping[str, str], path: Path, before: bytes | None, after: bytes, *, made_dir: bool) -> None:
    """What the file held before crosstalk's first edit (kept across re-installs), and the digest of what crosstalk
    wrote last."""
    backup = _backup_file(environ, path)
    kept = _kept(backup)
    original = kept.get("before") if kept is not None else (before.decode("utf-8", "surrogateescape") if before
                                                            is not None else None)  # fmt: skip
    backup.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    made = bool(kept.get("made_dir")) if kept is not None else made_dir
    data = {"path": str(path), "before": original, "after": hashlib.sha256(after).hexdigest(), "made_dir": made}
    atomic_write(backup, (json.dumps(data) + "\n").encode(), mode=0o600)


def _kept(backup: Path) -> dict[str, Any] | None:
    raw = read_capped(backup, MAX_SETTINGS_BYTES * 2)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _change(path: Path, before: bytes | None, after: bytes | None) -> ConfigChange:
    if before == after:
        return ConfigChange(str(path), "unchanged" if after is not None else "absent")
    return ConfigChange(str(path), "created" if before is None else "updated")


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
