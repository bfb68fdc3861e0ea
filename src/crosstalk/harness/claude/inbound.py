"""The receiving user's own control over cross-session messages: Claude Code's `crossSessionInbound` setting.

`accept` delivers every message, `hold` holds every one for the user (the session's own children too), `refuse`
refuses every one; unset, Claude holds a message whose sender's permission class differs from the session's
(docs/dev/claude-adapter.md has the experiment). crosstalk reads it where Claude reads settings, the first source
that sets it winning: managed settings, the session's `--settings` argument, the project's local then shared
settings, the user's settings. A source crosstalk cannot read is no evidence either way: Claude's receipt for the
message still says what it did.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from crosstalk.core.errors import UntrustedInput
from crosstalk.core.untrusted import loads
from crosstalk.fs.reading import read_capped
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


def _settings_argument(pid: int) -> dict[str, object] | None:
    """The session's `--settings` value: inline JSON, or a file's path."""
    raw = read_capped(f"/proc/{pid}/cmdline", MAX_CMDLINE_BYTES) if pid > 0 else None
    if not raw:
        return None
    args = raw.decode(errors="replace").split("\0")
    for i, arg in enumerate(args):
        value = args[i + 1] if arg == "--settings" and i + 1 < len(args) else None
        if arg.startswith("--settings="):
            value = arg.split("=", 1)[1]
        if value is None:
            continue
        if value.lstrip().startswith("{"):
            return _json_object(value)
        return _json_object(read_capped(value, MAX_SETTINGS_BYTES))
    return None


def _sources(pid: int, cwd: str | None, environ: Mapping[str, str]) -> Iterator[dict[str, object] | None]:
    yield _json_object(read_capped(MANAGED, MAX_SETTINGS_BYTES))
    yield _settings_argument(pid)
    if cwd:
        yield _json_object(read_capped(Path(cwd) / ".claude" / "settings.local.json", MAX_SETTINGS_BYTES))
        yield _json_object(read_capped(Path(cwd) / ".claude" / "settings.json", MAX_SETTINGS_BYTES))
    yield _json_object(read_capped(config_dir(environ) / "settings.json", MAX_SETTINGS_BYTES))


def inbound_setting(pid: int, cwd: str | None, environ: Mapping[str, str]) -> str | None:
    """`accept`, `hold` or `refuse` as the Claude session `pid` (working in `cwd`) is set, or None when unset."""
    for settings in _sources(pid, cwd, environ):
        value = settings.get(SETTING) if settings else None
        if value in VALUES:
            return str(value)
    return None
