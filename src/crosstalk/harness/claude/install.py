"""`crosstalk install claude`: register `crosstalk mcp` with Claude Code the way `claude mcp add` does, plus the
crosstalk skill. Idempotent: an install that finds everything in place writes nothing (not a byte changes).

    scope user     $CLAUDE_CONFIG_DIR/.claude.json (else ~/.claude.json)  mcpServers.crosstalk
                   $CLAUDE_CONFIG_DIR/skills/crosstalk/SKILL.md (else ~/.claude/skills/...)
    scope project  <cwd>/.mcp.json  mcpServers.crosstalk
                   <cwd>/.claude/skills/crosstalk/SKILL.md

The entry is `{"type": "stdio", "command": <absolute path>, "args": ["mcp"], "env": {}}`, as `claude mcp add -s
user crosstalk -- <path> mcp` writes it. Other settings in the file are kept as they are (the file is rewritten
with Claude's own indentation only when the entry changes). A config file that is not a JSON object is an error
that names it, and nothing is written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.fs.atomic import atomic_write, replace_keeping_mode
from crosstalk.fs.reading import read_capped, read_json_object
from crosstalk.harness.base import ConfigChange, InstallError

SERVER = "crosstalk"
SKILL = Path(__file__).with_name("SKILL.md")
MAX_CONFIG_BYTES = 64 * 1024 * 1024
SCOPES = ("user", "project")


def _home(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME")
    return Path(home) if home else Path.home()


def config_file(scope: str, environ: Mapping[str, str], cwd: Path) -> Path:
    if scope == "project":
        return cwd / ".mcp.json"
    config = environ.get("CLAUDE_CONFIG_DIR")
    return Path(config).expanduser() / ".claude.json" if config else _home(environ) / ".claude.json"


def skill_file(scope: str, environ: Mapping[str, str], cwd: Path) -> Path:
    if scope == "project":
        base = cwd / ".claude"
    else:
        config = environ.get("CLAUDE_CONFIG_DIR")
        base = Path(config).expanduser() if config else _home(environ) / ".claude"
    return base / "skills" / SERVER / "SKILL.md"


def entry(command: Sequence[str]) -> dict[str, Any]:
    return {"type": "stdio", "command": command[0], "args": list(command[1:]), "env": {}}


def install(scope: str, command: Sequence[str], environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    """Register `command` (argv, absolute) as the crosstalk MCP server, and install the skill."""
    _check_scope(scope)
    path = config_file(scope, environ, cwd)
    config = _read_config(path)
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InstallError(f"{path}: mcpServers is not a JSON object; fix or remove it, then install again")
    wanted = entry(command)
    changes = [ConfigChange(str(path), "unchanged")]
    if servers.get(SERVER) != wanted:
        changes[0] = ConfigChange(str(path), "updated" if path.exists() else "created")
        servers[SERVER] = wanted
        replace_keeping_mode(path, (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode())
    skill = skill_file(scope, environ, cwd)
    text = SKILL.read_bytes()
    if read_capped(skill, len(text) + 1) == text:
        changes.append(ConfigChange(str(skill), "unchanged"))
    else:
        changes.append(ConfigChange(str(skill), "updated" if skill.exists() else "created"))
        skill.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(skill, text, mode=0o644)
    return changes


def uninstall(scope: str, environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    """Remove the crosstalk entry (other servers and settings stay) and the skill."""
    _check_scope(scope)
    path = config_file(scope, environ, cwd)
    changes = [ConfigChange(str(path), "absent")]
    if path.exists():
        config = _read_config(path)
        servers = config.get("mcpServers")
        if isinstance(servers, dict) and SERVER in servers:
            del servers[SERVER]
            replace_keeping_mode(path, (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode())
            changes[0] = ConfigChange(str(path), "removed")
    skill = skill_file(scope, environ, cwd)
    if skill.parent.is_dir() and not skill.parent.is_symlink():
        shutil.rmtree(skill.parent)
        changes.append(ConfigChange(str(skill), "removed"))
    else:
        changes.append(ConfigChange(str(skill), "absent"))
    return changes


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} (expected one of: {', '.join(SCOPES)})")


def _read_config(path: Path) -> dict[str, Any]:
    try:
        return read_json_object(path, MAX_CONFIG_BYTES)
    except ValueError as exc:
        raise InstallError(str(exc)) from None
