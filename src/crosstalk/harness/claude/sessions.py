"""Claude Code's session registry: `$CLAUDE_CONFIG_DIR/sessions/<pid>.json` (default `~/.claude`), one record per
live session process, written by Claude in every mode and removed on a clean exit (HARNESSES.md).

A record is evidence only while its process lives: pid + `procStart` (field 22 of /proc/<pid>/stat) must name the
running process, or the record is stale (a crash leaves it behind; the pid may be reused). Every read is capped,
never follows a symlink and never blocks on a FIFO planted under a record's name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from crosstalk.fs.procinfo import is_same_process
from crosstalk.fs.reading import read_capped

MAX_RECORD_BYTES = 256 * 1024
MAX_RECORDS = 4096  # a directory with more entries is read only this far


def config_dir(environ: Mapping[str, str]) -> Path:
    config = environ.get("CLAUDE_CONFIG_DIR")
    if config:
        return Path(config).expanduser()
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude"


def sessions_dir(environ: Mapping[str, str]) -> Path:
    return config_dir(environ) / "sessions"


def parse_record(raw: bytes) -> dict[str, Any] | None:
    """A record as Claude writes it, or None: it must be a JSON object with a non-empty string `sessionId`."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    ref = data.get("sessionId")
    return data if isinstance(ref, str) and ref else None


def read_record(environ: Mapping[str, str], pid: int) -> dict[str, Any] | None:
    """The registry record of Claude process `pid`, or None when it is missing, unreadable or not a record. Read
    afresh on every call: `/clear` starts a new session id in the same process."""
    if pid <= 0:
        return None
    raw = read_capped(sessions_dir(environ) / f"{pid}.json", MAX_RECORD_BYTES)
    return None if raw is None else parse_record(raw)


def text_field(record: Mapping[str, Any], key: str) -> str | None:
    value = record.get(key)
    return value if isinstance(value, str) and value else None


def is_live(record: Mapping[str, Any], pid: int) -> bool:
    """pid + procStart name the running process (a record without procStart proves nothing)."""
    started = record.get("procStart")
    return isinstance(started, str | int) and not isinstance(started, bool) and is_same_process(pid, str(started))


def live_records(environ: Mapping[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(pid, record) for every live session record, in pid order."""
    try:
        entries = sorted(os.scandir(sessions_dir(environ)), key=lambda e: e.name)[:MAX_RECORDS]
    except OSError:
        return
    for entry in entries:
        stem, dot, ext = entry.name.partition(".")
        if ext != "json" or not dot or not stem.isdigit():
            continue  # <pid>.<hash>.key files and anything else
        pid = int(stem)
        raw = read_capped(entry.path, MAX_RECORD_BYTES)
        record = None if raw is None else parse_record(raw)
        if record is not None and record.get("pid") in (pid, None) and is_live(record, pid):
            yield pid, record
