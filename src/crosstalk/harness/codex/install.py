"""`crosstalk install codex`: the `[mcp_servers.crosstalk]` entry in `$CODEX_HOME/config.toml` (default
`~/.codex/config.toml`), edited with tomlkit so every other setting, comment and blank line stays byte for byte.
Idempotent: an install that finds the entry as it should be writes nothing.

Codex gives its MCP children only HOME, LANG, PATH, SHELL, TERM and TMPDIR from its environment, plus the entry's
own `env`. So the entry carries whatever the shim needs to find the same state as the user's shell: CODEX_HOME when
it is not `~/.codex`, and CROSSTALK_HOME when the state root is not the default one (the caller says which).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from crosstalk.fs.atomic import replace_keeping_mode
from crosstalk.fs.reading import read_capped
from crosstalk.harness.base import ConfigChange, InstallError

SERVER = "crosstalk"
SCOPES = ("user",)
MAX_CONFIG_BYTES = 16 * 1024 * 1024


def codex_home(environ: Mapping[str, str]) -> Path:
    value = environ.get("CODEX_HOME")
    if value:
        return Path(value).expanduser()
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".codex"


def config_file(environ: Mapping[str, str]) -> Path:
    return codex_home(environ) / "config.toml"


def entry_env(environ: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """What the entry must carry past Codex's environment filter."""
    env = dict(extra)
    home = environ.get("HOME")
    default = (Path(home) if home else Path.home()) / ".codex"
    if codex_home(environ) != default:
        env["CODEX_HOME"] = str(codex_home(environ))
    return env


def install(
    scope: str, command: Sequence[str], environ: Mapping[str, str], extra_env: Mapping[str, str]
) -> list[ConfigChange]:
    _check_scope(scope)
    path = config_file(environ)
    doc = _read(path)
    servers = doc.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    elif not isinstance(servers, dict):
        raise InstallError(f"{path}: mcp_servers is not a table; fix it, then install again")
    wanted: dict[str, Any] = {"command": command[0], "args": list(command[1:])}
    env = entry_env(environ, extra_env)
    if env:
        wanted["env"] = env
    current = servers.get(SERVER)
    if current is not None and _plain(current) == wanted:
        return [ConfigChange(str(path), "unchanged")]
    existed = path.exists()
    table = tomlkit.table()
    for key, value in wanted.items():
        table[key] = tomlkit.inline_table() if key == "env" else value
        if key == "env":
            table[key].update(value)
    servers[SERVER] = table
    replace_keeping_mode(path, tomlkit.dumps(doc).encode())
    return [ConfigChange(str(path), "updated" if existed else "created")]


def uninstall(scope: str, environ: Mapping[str, str]) -> list[ConfigChange]:
    _check_scope(scope)
    path = config_file(environ)
    if not path.exists():
        return [ConfigChange(str(path), "absent")]
    doc = _read(path)
    servers = doc.get("mcp_servers")
    if not isinstance(servers, dict) or SERVER not in servers:
        return [ConfigChange(str(path), "absent")]
    del servers[SERVER]
    if not servers:
        del doc["mcp_servers"]
    text = tomlkit.dumps(doc)
    # The blank line that set our table apart goes with it: the file ends as the user's did.
    text = text.rstrip("\n") + "\n" if text.strip() else ""
    replace_keeping_mode(path, text.encode())
    return [ConfigChange(str(path), "removed")]


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} for codex (expected one of: {', '.join(SCOPES)})")


def _read(path: Path) -> tomlkit.TOMLDocument:
    if not path.exists():
        return tomlkit.document()
    raw = read_capped(path, MAX_CONFIG_BYTES)
    if raw is None:
        raise InstallError(f"{path}: cannot read it (not a regular file, a symlink, or over 16 MiB)")
    try:
        return tomlkit.parse(raw.decode())
    except (TOMLKitError, UnicodeDecodeError) as exc:
        raise InstallError(f"{path}: not valid TOML ({exc}); fix it, then install again") from None
