"""Who is calling: identity per tools/call request, never per process (seed 000 §3, ADR 0006).

Codex puts the thread id in every tools/call's `_meta.threadId`. Claude sends no session id; its MCP server's parent
is the Claude process, whose registry record `$CLAUDE_CONFIG_DIR/sessions/<pid>.json` (default `~/.claude`) names
the current session. That file is read afresh on every call: `/clear` starts a new session id in the same process,
and the next call must bind the new session. The fake harness (tests) carries its session in `_meta`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crosstalk.shim.router import CallContext

CODEX, CLAUDE, FAKE, AUTO = "codex", "claude", "fake", "auto"
HARNESSES = (CODEX, CLAUDE, FAKE, AUTO)
FAKE_SESSION_KEY = "crosstalk/session"
FAKE_NAME_KEY = "crosstalk/name"
MAX_RECORD_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Identity:
    harness: str  # codex | claude | fake (never auto)
    session_ref: str
    preferred_name: str | None = None
    harness_pid: int | None = None  # Claude: the session process (the shim's parent)

    @property
    def key(self) -> tuple[str, str]:
        return (self.harness, self.session_ref)


def claude_sessions_dir(environ: Mapping[str, str]) -> Path:
    config = environ.get("CLAUDE_CONFIG_DIR")
    if config:
        return Path(config).expanduser()
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude"


def read_claude_record(environ: Mapping[str, str], pid: int) -> dict[str, Any] | None:
    """The registry record of Claude process `pid`, or None when it is missing, unreadable or not a record."""
    if pid <= 0:
        return None
    path = claude_sessions_dir(environ) / "sessions" / f"{pid}.json"
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    ref = data.get("sessionId")
    return data if isinstance(ref, str) and ref else None


def _codex(ctx: CallContext) -> Identity | None:
    ref = ctx.meta.get("threadId")
    return Identity(CODEX, ref) if isinstance(ref, str) and ref else None


def _claude(ctx: CallContext, environ: Mapping[str, str]) -> Identity | None:
    record = read_claude_record(environ, ctx.parent_pid)
    if record is None:
        return None
    name = record.get("name")
    return Identity(
        CLAUDE,
        record["sessionId"],
        name if isinstance(name, str) and name else None,
        harness_pid=ctx.parent_pid,
    )


def _fake(ctx: CallContext) -> Identity | None:
    ref = ctx.meta.get(FAKE_SESSION_KEY)
    if not isinstance(ref, str) or not ref:
        return None
    name = ctx.meta.get(FAKE_NAME_KEY)
    return Identity(FAKE, ref, name if isinstance(name, str) and name else None)


def resolve_identity(harness: str, ctx: CallContext, environ: Mapping[str, str] | None = None) -> Identity | None:
    """The calling session from this request's own evidence, or None (unbound). `auto`: Codex evidence first
    (a threadId in _meta), else Claude (the parent's registry record)."""
    env = os.environ if environ is None else environ
    if harness == CODEX:
        return _codex(ctx)
    if harness == CLAUDE:
        return _claude(ctx, env)
    if harness == FAKE:
        return _fake(ctx)
    if harness == AUTO:
        return _codex(ctx) or _claude(ctx, env)
    raise ValueError(f"unknown harness {harness!r} (expected one of: {', '.join(HARNESSES)})")


def identify(harness: str, ctx: CallContext, environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(harness, session_ref) of the calling session, or None without binding evidence."""
    ident = resolve_identity(harness, ctx, environ)
    return ident.key if ident else None


def preferred_name(harness: str, ctx: CallContext, environ: Mapping[str, str] | None = None) -> str | None:
    """The session's own name, if its harness gives one (Claude record `name`; fake `_meta`); Codex: none."""
    ident = resolve_identity(harness, ctx, environ)
    return ident.preferred_name if ident else None
