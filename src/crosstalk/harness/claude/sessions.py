"""Claude Code's session registry: `$CLAUDE_CONFIG_DIR/sessions/<pid>.json` (default `~/.claude`), one record per
live session process, written by Claude in every mode and removed on a clean exit (HARNESSES.md).

A record is evidence only while its process lives: pid + `procStart` (field 22 of /proc/<pid>/stat) must name the
running process, or the record is stale (a crash leaves it behind; the pid may be reused). Every read is capped,
never follows a symlink and never blocks on a FIFO planted under a record's name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from crosstalk.core import untrusted
from crosstalk.fs.procinfo import is_same_process
from crosstalk.fs.reading import StatCache, read_capped

MAX_RECORD_BYTES = 256 * 1024
MAX_RECORDS = 4096  # records of this user's running processes read, at most


_dirs: dict[tuple[str | None, str | None, str | None], tuple[Path, Path]] = {}  # the paths, worked out once per inputs


def _dirs_of(environ: Mapping[str, str]) -> tuple[Path, Path]:
    key = (environ.get("CLAUDE_CONFIG_DIR"), environ.get("HOME"), os.environ.get("HOME"))  # expanduser reads the last
    found = _dirs.get(key)
    if found is None:
        config, home = key[0], key[1]
        root = Path(config).expanduser() if config else (Path(home) if home else Path.home()) / ".claude"
        found = (root, root / "sessions")
        if len(_dirs) < 64:
            _dirs[key] = found
    return found


def config_dir(environ: Mapping[str, str]) -> Path:
    return _dirs_of(environ)[0]


def sessions_dir(environ: Mapping[str, str]) -> Path:
    return _dirs_of(environ)[1]


def parse_record(raw: bytes) -> dict[str, Any] | None:
    """A record as Claude writes it, or None: it must be a JSON object with a non-empty string `sessionId`."""
    try:
        data = untrusted.loads(raw, what="a Claude session record", max_bytes=MAX_RECORD_BYTES)
    except untrusted.UntrustedInput:
        return None
    if not isinstance(data, dict):
        return None
    ref = data.get("sessionId")
    return data if isinstance(ref, str) and ref else None


_records = StatCache(parse_record, MAX_RECORD_BYTES)


def read_record(environ: Mapping[str, str], pid: int) -> dict[str, Any] | None:
    """The registry record of Claude process `pid`, or None when it is missing, unreadable or not a record. Current
    on every call (`/clear` starts a new session id in the same process): the file is stat-checked each time and
    read again whenever it changed (fs/reading.py StatCache); the caller gets its own copy."""
    if pid <= 0:
        return None
    record = _records.get(os.path.join(sessions_dir(environ), f"{pid}.json"))
    return None if record is None else dict(record)


def text_field(record: Mapping[str, Any], key: str) -> str | None:
    value = record.get(key)
    return value if isinstance(value, str) and value else None


def is_live(record: Mapping[str, Any], pid: int) -> bool:
    """pid + procStart name the running process (a record without procStart proves nothing)."""
    started = record.get("procStart")
    return isinstance(started, str | int) and not isinstance(started, bool) and is_same_process(pid, str(started))


def live_records(environ: Mapping[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(pid, record) for every live session record of this user's processes, in pid order.

    Only `<pid>.json` names of running processes this user owns are candidates (a stat of /proc/<pid> each, no file
    read), and MAX_RECORDS caps the candidates, never the directory: junk, or records of processes that do not run
    or are another user's, cannot push a real record out. Another user's process is never a session of ours."""
    try:
        with os.scandir(sessions_dir(environ)) as entries:
            pids = sorted(pid for pid in (_record_pid(e.name) for e in entries) if pid is not None)
    except OSError:
        return
    for pid in [pid for pid in pids if _own_process(pid)][:MAX_RECORDS]:
        raw = read_capped(sessions_dir(environ) / f"{pid}.json", MAX_RECORD_BYTES)
        record = None if raw is None else parse_record(raw)
        if record is not None and record.get("pid") in (pid, None) and is_live(record, pid):
            yield pid, record


def _record_pid(name: str) -> int | None:
    """The pid a `<pid>.json` record name carries; None for anything else (`<pid>.<hash>.key` files, junk)."""
    stem, dot, ext = name.partition(".")
    if ext != "json" or not dot or not stem.isdigit() or len(stem) > 10:
        return None
    pid = int(stem)
    return pid if pid > 0 else None


def _own_process(pid: int) -> bool:
    """A running process owned by this user (/proc/<pid> belongs to the process's uid)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.geteuid()
    except OSError:
        return False
