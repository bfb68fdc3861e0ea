"""Whether `crosstalk install` is in place for each harness: the files each install writes (harness/<kind>/install.py
says where), read without changing a byte."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.doctor.facts import Install
from crosstalk.fs.reading import read_capped, read_json_object
from crosstalk.harness.claude import install as claude
from crosstalk.harness.codex import install as codex
from crosstalk.harness.gemini import install as gemini
from crosstalk.harness.opencode import install as opencode
from crosstalk.harness.pi import install as pi
from crosstalk.harness.qwen import install as qwen

MAX_BYTES = 16 * 1024 * 1024


def _runnable(command: Sequence[str]) -> bool:
    return bool(command) and os.path.isfile(command[0]) and os.access(command[0], os.X_OK)


def _argv(value: Any) -> tuple[str, ...]:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return ()


def _json(path: Path) -> dict[str, Any]:
    return read_json_object(path, MAX_BYTES) if path.exists() else {}


def claude_install(environ: Mapping[str, str], cwd: Path) -> Install:
    where, command, missing = [], (), []
    try:
        for scope in claude.SCOPES:
            config = claude.config_file(scope, environ, cwd)
            entry = _json(config).get("mcpServers", {})
            entry = entry.get(claude.SERVER) if isinstance(entry, dict) else None
            if not isinstance(entry, dict):
                continue
            where.append(str(config))
            command = command or (entry.get("command", ""), *_argv(entry.get("args")))
            if not claude.skill_file(scope, environ, cwd).is_file():
                missing.append(f"the skill {claude.skill_file(scope, environ, cwd)}")
    except (ValueError, OSError) as exc:
        return Install("claude", False, error=str(exc))
    return Install("claude", bool(where), tuple(where), command, _runnable(command), tuple(missing))


def codex_entry(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The [mcp_servers.crosstalk] table of Codex's config.toml, or None; ValueError when the file is unreadable."""
    path = codex.config_file(environ)
    if not path.exists():
        return None
    raw = read_capped(path, MAX_BYTES)
    if raw is None:
        raise ValueError(f"{path}: cannot read it (not a regular file, a symlink, or too large)")
    try:
        doc = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None
    servers = doc.get("mcp_servers")
    entry = servers.get(codex.SERVER) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None


def codex_install(environ: Mapping[str, str]) -> Install:
    try:
        entry = codex_entry(environ)
    except ValueError as exc:
        return Install("codex", False, error=str(exc))
    if entry is None:
        return Install("codex", False)
    command = (str(entry.get("command", "")), *_argv(entry.get("args")))
    return Install("codex", True, (str(codex.config_file(environ)),), command, _runnable(command))


def pi_install(environ: Mapping[str, str], cwd: Path) -> Install:
    where = []
    try:
        package = str(pi.package_dir())
        for scope in pi.SCOPES:
            settings = pi.settings_file(scope, environ, cwd)
            packages = _json(settings).get(pi.KEY)
            if isinstance(packages, list) and any(pi._same(e, package, settings) for e in packages):
                where.append(str(settings))
        command = _argv(_json(pi.config_file(environ)).get("command"))
    except (ValueError, OSError) as exc:
        return Install("pi", False, error=str(exc))
    except pi.InstallError as exc:
        return Install("pi", False, error=str(exc))
    missing = () if command or not where else (f"the extension's command in {pi.config_file(environ)}",)
    return Install("pi", bool(where), tuple(where), command, not command or _runnable(command), missing)


def qwen_install(environ: Mapping[str, str], cwd: Path) -> Install:
    """`mcpServers.crosstalk` in Qwen's settings, and crosstalk's tools in `tools.visible` (else Qwen hides them
    behind its tool search and the model does not see them)."""
    where, command, missing = [], (), []
    try:
        for scope in qwen.SCOPES:
            settings = qwen.settings_file(scope, environ, cwd)
            data = _json(settings)
            servers, tools = data.get("mcpServers"), data.get("tools")
            entry = servers.get(qwen.SERVER) if isinstance(servers, dict) else None
            if not isinstance(entry, dict):
                continue
            where.append(str(settings))
            command = command or (entry.get("command", ""), *_argv(entry.get("args")))
            visible = tools.get("visible") if isinstance(tools, dict) else None
            if not isinstance(visible, list) or not all(t in visible for t in qwen.VISIBLE):
                missing.append(f"crosstalk's tools in tools.visible of {settings}")
    except (ValueError, OSError) as exc:
        return Install("qwen", False, error=str(exc))
    return Install("qwen", bool(where), tuple(where), command, _runnable(command), tuple(missing))


def gemini_install(environ: Mapping[str, str], cwd: Path) -> Install:
    """`mcpServers.crosstalk` in Gemini CLI's settings, and crosstalk's hook on each event it uses (without them the
    session is never identified and no message reaches its model)."""
    where, command, missing = [], (), []
    try:
        for scope in gemini.SCOPES:
            settings = gemini.settings_file(scope, environ, cwd)
            data = _json(settings)
            servers, hooks = data.get("mcpServers"), data.get("hooks")
            entry = servers.get(gemini.SERVER) if isinstance(servers, dict) else None
            if not isinstance(entry, dict):
                continue
            where.append(str(settings))
            command = command or (entry.get("command", ""), *_argv(entry.get("args")))
            for event in gemini.EVENTS:
                groups = hooks.get(event) if isinstance(hooks, dict) else None
                if not (isinstance(groups, list) and any(gemini.ours(g) for g in groups)):
                    missing.append(f"crosstalk's {event} hook in {settings}")
    except (ValueError, OSError) as exc:
        return Install("gemini", False, error=str(exc))
    return Install("gemini", bool(where), tuple(where), command, _runnable(command), tuple(missing))


def opencode_install(environ: Mapping[str, str], cwd: Path) -> Install:
    """`mcp.crosstalk` in OpenCode's config, and crosstalk's plugin in its `plugin` list, as a file that is there
    (without the plugin no call says which session makes it)."""
    where, missing = [], []
    command: tuple[str, ...] = ()
    try:
        for scope in opencode.SCOPES:
            config = opencode.settings_file(scope, environ, cwd)
            data = _json(config)
            servers, plugins = data.get("mcp"), data.get("plugin")
            entry = servers.get(opencode.SERVER) if isinstance(servers, dict) else None
            if not isinstance(entry, dict):
                continue
            where.append(str(config))
            command = command or _argv(entry.get("command"))
            ours = [p for p in plugins if opencode.is_ours(p)] if isinstance(plugins, list) else []
            if not any(Path(p.removeprefix("file://")).is_file() for p in ours):
                missing.append(f"crosstalk's plugin in the plugin list of {config}")
    except (ValueError, OSError) as exc:
        return Install("opencode", False, error=str(exc))
    return Install("opencode", bool(where), tuple(where), command, _runnable(command), tuple(missing))


def gather(environ: Mapping[str, str], cwd: Path) -> tuple[Install, ...]:
    return (claude_install(environ, cwd), codex_install(environ), pi_install(environ, cwd), qwen_install(environ, cwd),
            gemini_install(environ, cwd), opencode_install(environ, cwd))  # fmt: skip
