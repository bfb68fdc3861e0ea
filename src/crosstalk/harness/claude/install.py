"""`crosstalk install claude`: register `crosstalk mcp` with Claude Code the way `claude mcp add` does, plus the
crosstalk skill. Idempotent: an install that finds everything in place writes nothing (not a byte changes).

    scope user     $CLAUDE_CONFIG_DIR/.claude.json (else ~/.claude.json)  mcpServers.crosstalk
                   $CLAUDE_CONFIG_DIR/skills/crosstalk/SKILL.md (else ~/.claude/skills/...)
    scope project  <cwd>/.mcp.json  mcpServers.crosstalk
                   <cwd>/.claude/skills/crosstalk/SKILL.md

The entry is `{"type": "stdio", "command": <absolute path>, "args": ["mcp"], "env": {}}`, as `claude mcp add -s
user crosstalk -- <path> mcp` writes it. Other settings in the file are kept as they are (the file is rewritten
with Claude's own indentation only when the entry changes). A config file that is not a JSON object is an error
that names it, and nothing is written. Claude Code rewrites `.claude.json` constantly: the edit holds the lock
Claude Code takes for its own saves and is replaced only if nobody wrote it meanwhile (fs/config_edit.py).

The skill folder may hold the user's own files, and SKILL.md may be the user's: crosstalk writes SKILL.md only when
it is absent or a version crosstalk wrote (its sha256 is one crosstalk shipped, or the one recorded in the folder's
`.crosstalk-skill` marker), and uninstall removes only such a SKILL.md, the marker, and the folder if then empty.
A SKILL.md the user changed is `kept`, by install and by uninstall.

Uninstall is a clean undo (fs/install_undo.py): a config file still as crosstalk left it gets its bytes from before
the install back (`restored`, or `removed` when install created it), one changed since loses only crosstalk's entry,
and the directories install made go when empty.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.config_edit import json_bytes, json_object, read_config, update
from crosstalk.fs.errors import ConfigRefused
from crosstalk.fs.install_undo import UndoRecord, missing_dirs
from crosstalk.fs.state_root import state_root
from crosstalk.harness.base import ConfigChange
from crosstalk.harness.config_files import drop_entry, install_edit, uninstall_edit
from crosstalk.harness.errors import InstallError

SERVER = "crosstalk"
SCOPES = ("user", "project")
SKILL = Path(__file__).with_name("SKILL.md")
MARKER = ".crosstalk-skill"  # beside SKILL.md: the sha256 of the SKILL.md crosstalk last wrote there
MAX_CONFIG_BYTES = 64 * 1024 * 1024
LOCK_WAIT_S = 10.0  # Claude Code holds its config lock for one save: milliseconds
LOCK_STALE_S = 30.0  # a lock directory untouched this long was left by a process that died (Claude Code refreshes it)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# Every SKILL.md crosstalk has shipped: an install from before the marker existed left one of these.
SHIPPED = frozenset({digest(SKILL.read_bytes()), "ed7075647087d6ff2788467eb1976801b97a7e6791de67e808334ee5ee8d8fd8"})


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
    wanted = entry(command)

    def add(raw: bytes | None) -> bytes | None:
        config = _parse(path, raw)
        servers = config.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise InstallError(f"{path}: mcpServers is not a JSON object; fix or remove it, then install again")
        if servers.get(SERVER) == wanted:
            return raw
        servers[SERVER] = wanted
        return json_bytes(config)

    skill = skill_file(scope, environ, cwd)
    made = missing_dirs(skill)
    changes = [install_edit(path, environ, lambda edit: _edit(path, edit), add), _install_skill(skill)]
    if changes[-1].action == "created":
        UndoRecord(state_root(environ), skill).keep(None, skill.read_bytes(), made)
    return changes


def uninstall(scope: str, environ: Mapping[str, str], cwd: Path) -> list[ConfigChange]:
    """Remove the crosstalk entry (other servers and settings stay) and crosstalk's skill."""
    _check_scope(scope)
    path = config_file(scope, environ, cwd)

    def remove(raw: bytes | None) -> bytes | None:
        if raw is None:
            return None
        config = _parse(path, raw)
        return json_bytes(config) if drop_entry(config, "mcpServers", SERVER) else raw

    done = uninstall_edit(path, environ, lambda edit: _edit(path, edit), remove)
    changes = [done] if done is not None else []
    skill = skill_file(scope, environ, cwd)
    changes.append(_uninstall_skill(skill))
    UndoRecord(state_root(environ), skill).finish()
    return changes


def _edit(path: Path, edit: Any) -> tuple[bytes | None, bytes | None]:
    try:
        return update(path, edit, limit=MAX_CONFIG_BYTES, lock=lambda: claude_lock(path))
    except ConfigRefused as exc:
        raise InstallError(str(exc)) from None


@contextlib.contextmanager
def claude_lock(path: Path) -> Iterator[None]:
    """The lock Claude Code takes around its own saves of a config file: the directory `<file>.lock`, made with
    mkdir (proper-lockfile's protocol). One older than LOCK_STALE_S was left by a dead process and is taken over."""
    lock = path.with_name(path.name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + LOCK_WAIT_S
    delay = 0.001
    while True:
        try:
            os.mkdir(lock, 0o700)
            break
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                if time.time() - os.lstat(lock).st_mtime > LOCK_STALE_S:
                    with contextlib.suppress(OSError):
                        os.rmdir(lock)
                    continue
            if time.monotonic() > deadline:
                held = f"Claude Code's lock on {path.name} has been held for over {LOCK_WAIT_S:.0f} s"
                raise InstallError(f"{lock}: {held}; try again (remove it if no claude is running)") from None
            time.sleep(delay)  # the holder is another program: nothing to wait on but the directory
            delay = min(delay * 2, 0.05)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(lock)


# ------------------------------------------------------------------ the skill
def _regular(path: Path) -> bytes | None:
    """The file's bytes when it is a regular file (None: absent); a symlink or anything else is the user's."""
    try:
        return read_config(path, MAX_CONFIG_BYTES)
    except ConfigRefused:
        return b""  # never crosstalk's: kept


def _ours(skill: Path, data: bytes) -> bool:
    recorded = _regular(skill.with_name(MARKER)) or b""
    return digest(data) in SHIPPED or digest(data) == recorded.decode("ascii", "replace").strip()


def _install_skill(skill: Path) -> ConfigChange:
    text = SKILL.read_bytes()
    current = _regular(skill)
    if current == text:
        _mark(skill, text)
        return ConfigChange(str(skill), "unchanged")
    if current is not None and not _ours(skill, current):
        return ConfigChange(str(skill), "kept")  # the user's: install_cmd says why
    skill.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(skill, text, mode=0o644)
    _mark(skill, text)
    return ConfigChange(str(skill), "created" if current is None else "updated")


def _mark(skill: Path, text: bytes) -> None:
    marker = skill.with_name(MARKER)
    record = (digest(text) + "\n").encode()
    if _regular(marker) != record:
        atomic_write(marker, record, mode=0o644)


def _uninstall_skill(skill: Path) -> ConfigChange:
    current = _regular(skill)
    if current is None:
        action = "absent"
    elif _ours(skill, current) and stat.S_ISREG(os.lstat(skill).st_mode):
        skill.unlink()
        action = "removed"
    else:
        action = "kept"
    marker = skill.with_name(MARKER)
    if _regular(marker) not in (None, b""):
        marker.unlink()
    try:
        skill.parent.rmdir()  # only when nothing else is in it
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
            raise
    return ConfigChange(str(skill), action)


# ------------------------------------------------------------------ the config
def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise InstallError(f"unknown scope {scope!r} (expected one of: {', '.join(SCOPES)})")


def _parse(path: Path, raw: bytes | None) -> dict[str, Any]:
    try:
        return json_object(path, raw, MAX_CONFIG_BYTES)
    except ConfigRefused as exc:
        raise InstallError(str(exc)) from None
