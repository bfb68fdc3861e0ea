"""The receiving user's own control over cross-session messages: Claude Code's `crossSessionInbound` setting.

`accept` delivers every message, `hold` holds every one for the user (the session's own children too), `refuse`
refuses every one; unset, Claude holds a message whose sender's permission class differs from the session's
(docs/dev/claude-adapter.md has the experiment). crosstalk reads it where Claude reads settings, the first source
that sets it winning: managed settings, the session's `--settings` argument, the project's local then shared
settings, the user's settings. A source crosstalk cannot read is no evidence either way: Claude's receipt for the
message still says what it did.

Read before every message the adapter writes, so each settings file is parsed once and reused while its stat proves
it unchanged (fs/reading.py StatCache): an edit is obeyed from the next message on. The session's own command line is
read once per process (a process's arguments do not change; the file its `--settings` names is stat-checked).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from crosstalk.core.errors import UntrustedInput
from crosstalk.core.untrusted import loads
from crosstalk.fs.reading import StatCache, read_capped
from crosstalk.harness.claude.sessions import config_dir

SETTING = "crossSessionInbound"
VALUES = ("accept", "hold", "refuse")
MANAGED = Path("/etc/claude-code/managed-settings.json")
MAX_SETTINGS_BYTES = 1024 * 1024
MAX_CMDLINE_BYTES = 256 * 1024
REFUSE_REASON = f"{SETTING}: refuse (the receiving user's Claude Code setting)"


def _json_object(raw: bytes | str | None) -> dict[str, object] | None:
    if not raw:
        return None
    try:
        data = loads(raw, what="Claude Code settings", max_bytes=MAX_SETTINGS_BYTES)
    except UntrustedInput:
        return None  # Claude would not read it either; its receipt still says what it did
    return data if isinstance(data, dict) else None


_settings = StatCache(_json_object, MAX_SETTINGS_BYTES)
# pid -> (the identity of /proc/<pid>: its st_dev and st_ino, new for each process the pid names; the `--settings`
# value on its command line, or None). A Claude session that started our shim has long exec'd and never execs again.
_arguments: dict[int, tuple[tuple[int, int], str | None]] = {}


def _settings_value(pid: int) -> str | None:
    """The `--settings` value on the session's command line (inline JSON, or a file's path), or None."""
    try:
        st = os.stat(f"/proc/{pid}")
    except OSError:
        _arguments.pop(pid, None)
        return None
    proc = (st.st_dev, st.st_ino)
    cached = _arguments.get(pid)
    if cached is not None and cached[0] == proc:
        return cached[1]
    raw = read_capped(f"/proc/{pid}/cmdline", MAX_CMDLINE_BYTES)
    value = None
    args = raw.decode(errors="replace").split("\0") if raw else []
    for i, arg in enumerate(args):
        if arg == "--settings" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--settings="):
            value = arg.split("=", 1)[1]
        if value is not None:
            break
    if raw:  # empty: the process is mid-exec (its arguments not yet set) or a zombie; read it again next time
        if len(_arguments) >= 64:
            _arguments.clear()
        _arguments[pid] = (proc, value)
    return value


def _settings_argument(pid: int) -> dict[str, object] | None:
    """The session's `--settings`: inline JSON, or the file it names."""
    value = _settings_value(pid) if pid > 0 else None
    if value is None:
        return None
    if value.lstrip().startswith("{"):
        return _json_object(value)
    return _settings.get(value)


def _sources(pid: int, cwd: str | None, environ: Mapping[str, str]) -> Iterator[dict[str, object] | None]:
    yield _settings.get(MANAGED)
    yield _settings_argument(pid)
    if cwd:
        yield _settings.get(os.path.join(cwd, ".claude", "settings.local.json"))
        yield _settings.get(os.path.join(cwd, ".claude", "settings.json"))
    yield _settings.get(os.path.join(config_dir(environ), "settings.json"))


def inbound_setting(pid: int, cwd: str | None, environ: Mapping[str, str]) -> str | None:
    """`accept`, `hold` or `refuse` as the Claude session `pid` (working in `cwd`) is set, or None when unset."""
    for settings in _sources(pid, cwd, environ):
        value = settings.get(SETTING) if settings else None
        if value in VALUES:
            return str(value)
    return None
