"""Where a Gemini CLI session and its crosstalk shim meet: one private directory per user,
`/tmp/crosstalk-gemini-<uid>` (0700; `CROSSTALK_GEMINI_RUN_DIR` overrides it for tests), holding for each live
Gemini process `<pid>`:

    <pid>.json   the record crosstalk's hook writes on every hook event: the session id Gemini gave the hook on
                 stdin, the process's start ticks, cwd, the event; Gemini's MCP children and hooks share that
                 process as parent
    <pid>.sock   the socket the shim's adapter listens on while it serves that session; the hook asks it for what
                 is queued (harness/gemini/hook.py)

A record is evidence only while the process it names runs (pid and start ticks). Every read is capped; symlinks and
files of other users are refused. Gemini sends no session id in a tools/call (`_meta` has only a progress token),
so the record, read afresh per call, is how a call is tied to its session.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from crosstalk.fs.procinfo import is_same_process, proc_start_time
from crosstalk.fs.reading import read_capped

TYPE_CHECKING = False  # not `typing`: this module is on the path of a hook Gemini runs on every tool call
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

RUN_DIR_ENV = "CROSSTALK_GEMINI_RUN_DIR"
MAX_RECORD_BYTES = 16 * 1024
MAX_RECORDS = 4096
SHELLS = frozenset({"sh", "bash", "dash", "zsh"})


def run_dir(environ: Mapping[str, str], *, create: bool = False) -> Path | None:
    """The directory, when it is a private directory of this user (made when `create`); else None."""
    directory = Path(environ.get(RUN_DIR_ENV) or f"/tmp/crosstalk-gemini-{os.geteuid()}")
    if create:
        with contextlib.suppress(OSError):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        st = os.lstat(directory)
    except OSError:
        return None
    private = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077
    return directory if private and len(str(directory)) < 80 else None


def socket_path(directory: Path, pid: int) -> Path:
    return directory / f"{pid}.sock"


def parent_of(pid: int) -> int:
    raw = read_capped(f"/proc/{pid}/stat", 4096)
    try:
        return int(raw.rsplit(b")", 1)[1].split()[1]) if raw else 0
    except (IndexError, ValueError):
        return 0


def _comm(pid: int) -> str:
    raw = read_capped(f"/proc/{pid}/comm", 256)
    return raw.decode(errors="replace").strip() if raw else ""


def gemini_pid(start: int) -> int:
    """The Gemini process a hook runs under: its parent, past a shell Gemini may have run the command with."""
    pid = start
    for _ in range(3):
        if _comm(pid) not in SHELLS:
            return pid
        pid = parent_of(pid)
    return pid


def write_record(directory: Path, pid: int, session_id: str, cwd: str | None, event: str | None = None) -> bool:
    """The record for process `pid` naming `session_id` and the hook event it saw last (`status` reads it); written
    only when it changes. True when written."""
    start = proc_start_time(pid)
    if start is None:
        return False
    data = {"pid": pid, "start": start, "sessionId": session_id, "cwd": cwd, "event": event}
    path = directory / f"{pid}.json"
    if read_record_at(path) == data:
        return False
    tmp = directory / f".{pid}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(data))
    os.replace(tmp, path)
    return True


def status_of(record: dict[str, Any] | None) -> str:
    """busy while a turn runs (its last hook event started one or ended a tool call), idle after it ended."""
    event = record.get("event") if record else None
    return {"BeforeAgent": "busy", "AfterTool": "busy", "AfterAgent": "idle", "SessionStart": "idle"}.get(
        str(event), "unknown"
    )


def read_record_at(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
    raw = read_capped(path, MAX_RECORD_BYTES)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def read_record(environ: Mapping[str, str], pid: int) -> dict[str, Any] | None:
    """The live record of Gemini process `pid`: its file names that pid, a session id, and the running process's
    start ticks; else None."""
    directory = run_dir(environ)
    if directory is None or pid <= 0:
        return None
    data = read_record_at(directory / f"{pid}.json")
    if data is None or data.get("pid") != pid or not isinstance(data.get("sessionId"), str) or not data["sessionId"]:
        return None
    start = data.get("start")
    return data if isinstance(start, str) and is_same_process(pid, start) else None


def live_records(environ: Mapping[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    directory = run_dir(environ)
    if directory is None:
        return
    try:
        names = sorted(os.listdir(directory))[:MAX_RECORDS]
    except OSError:
        return
    for name in names:
        stem, _, ext = name.partition(".")
        if ext == "json" and stem.isdigit():
            record = read_record(environ, int(stem))
            if record is not None:
                yield int(stem), record


def prune(directory: Path) -> None:
    """Remove what Gemini processes that ended left here: each `<pid>.json` whose process (pid and start ticks) is
    gone, with its `<pid>.sock`. Run by the hook when a session starts."""
    try:
        names = os.listdir(directory)[:MAX_RECORDS]
    except OSError:
        return
    for name in names:
        stem, _, ext = name.partition(".")
        if ext != "json" or not stem.isdigit():
            continue
        data = read_record_at(directory / name)
        start = data.get("start") if data else None
        if isinstance(start, str) and is_same_process(int(stem), start):
            continue
        for path in (directory / name, socket_path(directory, int(stem))):
            with contextlib.suppress(OSError):
                path.unlink()
