"""`crosstalk install codex`: the `[mcp_servers.crosstalk]` entry in `$CODEX_HOME/config.toml` (default
`~/.codex/config.toml`). Idempotent: an install that finds the entry as it should be writes nothing.

Every byte of the user's stays: install appends the table at the end of the file (after one blank line; a file
without a final newline gets none after the table either), and uninstall cuts exactly that table (its header to its
last key) and the blank line before it, so a comment the user wrote after it, or an `[mcp_servers]` header of
their own, stays. An entry that is not where install puts it (moved, inline) is removed with tomlkit, which keeps
comments and formatting. `mcp_servers = {…}` (an inline table) cannot take a `[mcp_servers.crosstalk]` table
beside it: an error that says so and how to write it instead.

Codex gives its MCP children only HOME, LANG, PATH, SHELL, TERM and TMPDIR from its environment, plus the entry's
own `env`. So the entry carries whatever the shim needs to find the same state as the user's shell: CODEX_HOME when
it is not `~/.codex`, and CROSSTALK_HOME when the state root is not the default one (the caller says which).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable

from crosstalk.fs.config_edit import update
from crosstalk.fs.errors import ConfigRefused
from crosstalk.harness.base import ConfigChange
from crosstalk.harness.codex.endpoints import codex_home as codex_home  # there: discovery needs it without tomlkit
from crosstalk.harness.config_files import install_edit, uninstall_edit
from crosstalk.harness.errors import InstallError

SERVER = "crosstalk"
SCOPES = ("user",)
MAX_CONFIG_BYTES = 16 * 1024 * 1024
KEYS = ("command", "args", "env")  # what install writes; a key the user added to the table is theirs
_KEY = r"""[ \t]*(?:{0}|"{0}"|'{0}')[ \t]*"""
HEADER = re.compile(rf"^[ \t]*\[{_KEY.format('mcp_servers')}\.{_KEY.format(SERVER)}\][ \t]*(?:#[^\r\n]*)?\r?$", re.M)
HEADER_START = re.compile(r"^[ \t]*\[", re.M)
FILLER = re.compile(r"^[ \t]*(?:#[^\n]*)?\r?$")  # a blank or comment-only line


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
    wanted: dict[str, Any] = {"command": command[0], "args": list(command[1:])}
    env = entry_env(environ, extra_env)
    if env:
        wanted["env"] = env

    def add(raw: bytes | None) -> bytes | None:
        text = _text(path, raw)
        doc = _parse(path, text)
        servers = _servers(path, doc)
        current = servers.get(SERVER) if servers is not None else None
        if current is None:
            return _append(path, text, wanted).encode()
        if not isinstance(current, dict):
            raise InstallError(f"{path}: mcp_servers.{SERVER} is not a table; remove it, then install again")
        if {k: _plain(current.get(k)) for k in KEYS} == {k: wanted.get(k) for k in KEYS}:
            return raw
        for key in KEYS:
            if key in wanted:
                current[key] = _value(key, wanted[key])
            elif key in current:
                del current[key]
        return tomlkit.dumps(doc).encode()

    return [install_edit(path, environ, lambda edit: _edit(path, edit), add)]


def uninstall(scope: str, environ: Mapping[str, str]) -> list[ConfigChange]:
    _check_scope(scope)
    path = config_file(environ)

    def remove(raw: bytes | None) -> bytes | None:
        if raw is None:
            return None
        text = _text(path, raw)
        doc = _parse(path, text)
        servers = _servers(path, doc)
        if servers is None or SERVER not in servers:
            return raw
        return (_cut(text, doc) or _remove_with_tomlkit(doc)).encode()

    done = uninstall_edit(path, environ, lambda edit: _edit(path, edit), remove)
    return [done] if done is not None else []


def _edit(path: Path, edit: Any) -> tuple[bytes | None, bytes | None]:
    try:
        return update(path, edit, limit=MAX_CONFIG_BYTES)
    except ConfigRefused as exc:
        raise InstallError(str(exc)) from None


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _append(path: Path, text: str, wanted: dict[str, Any]) -> str:
    """text with the [mcp_servers.crosstalk] table appended (module docstring); checked by parsing it back."""
    nl = _newline(text)
    table = tomlkit.table()
    for key, value in wanted.items():
        table[key] = _value(key, value)
    block = f"[mcp_servers.{SERVER}]\n" + tomlkit.dumps(table)
    block = block.replace("\n", nl)
    if not text:
        new = block
    elif text.endswith("\n"):
        new = text + nl + block
    else:  # no final newline: none after our table either, so uninstall can give the file back as it was
        new = text + nl + nl + block[: -len(nl)]
    check = _parse(path, new)
    if _plain(check.get("mcp_servers", {}).get(SERVER)) != wanted:
        raise InstallError(f"{path}: cannot add [mcp_servers.{SERVER}] to it; add the entry by hand")
    return new


def _cut(text: str, doc: tomlkit.TOMLDocument) -> str | None:
    """text without the table install appended and the blank line before it, or None when the entry is not one
    [mcp_servers.crosstalk] table that can be cut out cleanly (then tomlkit removes it)."""
    headers = list(HEADER.finditer(text))
    if len(headers) != 1:
        return None
    start = headers[0].start()
    nxt = next((m.start() for m in HEADER_START.finditer(text, headers[0].end()) if _is_header(text, m.start())),
               len(text))  # fmt: skip
    lines = text[start:nxt].splitlines(keepends=True)
    while len(lines) > 1 and FILLER.match(lines[-1].rstrip("\n")):
        lines.pop()  # blank lines and comments after the last key: the user's
    end = start + sum(len(line) for line in lines)
    nl = _newline(text)
    head, tail = text[:start], text[end:]
    if not tail and not text.endswith("\n") and head.endswith(nl + nl):
        head = head[: -2 * len(nl)]  # install added a newline to the last line, and the blank one
    elif head.endswith(nl + nl) or head == nl:
        head = head[: -len(nl)]
    result = head + tail
    expected = doc.unwrap()
    del expected["mcp_servers"][SERVER]
    try:
        got = tomlkit.parse(result).unwrap()
    except TOMLKitError:
        return None
    if not expected["mcp_servers"] and "mcp_servers" not in got:
        del expected["mcp_servers"]
    return result if got == expected else None


def _is_header(text: str, at: int) -> bool:
    """A line starting `[` is a table header unless it is inside a value spanning lines (an array, a string)."""
    try:
        tomlkit.parse(text[:at])
    except TOMLKitError:
        return False
    return True


def _remove_with_tomlkit(doc: tomlkit.TOMLDocument) -> str:
    servers = doc["mcp_servers"]
    del servers[SERVER]
    return tomlkit.dumps(doc)


def _servers(path: Path, doc: tomlkit.TOMLDocument) -> Any:
    servers = doc.get("mcp_servers")
    if isinstance(servers, InlineTable):
        raise InstallError(f"{path}: mcp_servers is an inline table (mcp_servers = {{ … }}), which cannot take "
                           f"crosstalk's [mcp_servers.{SERVER}] table beside it; write each server as its own "
                           "[mcp_servers.NAME] table, then install again")  # fmt: skip
    if servers is not None and not isinstance(servers, dict):
        raise InstallError(f"{path}: mcp_servers is not a table; fix it, then install again")
    return servers


def _value(key: str, value: Any) -> Any:
    if key != "env":
        return value
    table = tomlkit.inline_table()
    table.update(value)
    return table


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} for codex (expected one of: {', '.join(SCOPES)})")


def _text(path: Path, raw: bytes | None) -> str:
    try:
        return raw.decode() if raw is not None else ""
    except UnicodeDecodeError as exc:
        raise InstallError(f"{path}: not UTF-8 ({exc}); fix it, then install again") from None


def _parse(path: Path, text: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        raise InstallError(f"{path}: not valid TOML ({exc}); fix it, then install again") from None
