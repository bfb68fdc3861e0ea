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

A clean undo: install keeps the file's bytes from before its edit (`$CROSSTALK_HOME/opencode-install/<hash>.json`,
0600); uninstall puts them back byte for byte when the file is still as crosstalk left it. When the user (or
OpenCode) changed it since, uninstall removes only crosstalk's entries, and the containers they were the only content
of. A config file that is not a JSON object (comments included: JSONC) is an error naming it, and nothing is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.config_edit import json_bytes, json_object, update
from crosstalk.fs.errors import ConfigRefused
from crosstalk.fs.reading import read_capped
from crosstalk.harness.base import ConfigChange
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


def crosstalk_home(environ: Mapping[str, str]) -> Path:
    """Where crosstalk keeps its state (as registry.paths.StatePaths.from_env says)."""
    if environ.get("CROSSTALK_HOME"):
        return Path(environ["CROSSTALK_HOME"]).expanduser()
    xdg = environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "crosstalk"
    return Path(environ.get("HOME") or Path.home()) / ".local" / "state" / "crosstalk"


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


def _backup_file(environ: Mapping[str, str], path: Path) -> Path:
    digest = hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:16]
    return crosstalk_home(environ) / "opencode-install" / f"{digest}.json"


def install(
    scope: str, command: Sequence[str], environ: Mapping[str, str], cwd: Path,
    extra_env: Mapping[str, str] | None = None,
) -> list[ConfigChange]:  # fmt: skip
    path = settings_file(scope, environ, cwd)
    wanted = entry(command, extra_env)
    had_dir = path.parent.is_dir()

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
        servers, plugins = settings.get("mcp"), settings.get("plugin")
        changed = False
        if isinstance(servers, dict) and SERVER in servers:
            del servers[SERVER]
            changed = True
            if not servers:
                del settings["mcp"]
        if isinstance(plugins, list) and any(is_ours(p) for p in plugins):
            settings["plugin"] = [p for p in plugins if not is_ours(p)]
            changed = True
            if not settings["plugin"]:
                del settings["plugin"]
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


def is_ours(spec: object) -> bool:
    """A plugin entry naming crosstalk's plugin file (this installation's, or another crosstalk's: same name)."""
    ends = ("/integrations/opencode/crosstalk.js", "/harness/opencode/plugin/crosstalk.js")
    return isinstance(spec, str) and spec.startswith("file://") and spec.endswith(ends)
