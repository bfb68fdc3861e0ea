"""Qwen Code's session registry (its cross-session protocol, section 1): `$QWEN_HOME/sessions/<pid>.json` or
`<pid>-<8 hex>.json` (default `~/.qwen`), one record per live interactive session, written by the TUI (not by `-p`
or stream-json) and removed when it exits.

A record is a self-report, evidence only while its process lives. It is taken only when: the name's pid prefix
equals its `pid`; `schemaVersion` is 1; `pidNs` is this process's pid namespace; `procStart` is `<boot id>:<start
ticks>` of this boot and of the running process with that pid; the file and the process belong to this user. Every
read is capped and refuses symlinks and FIFOs; the sessions directory must be a real directory of this user.
`sessionId` changes under the same pid on `/clear` and `/resume`: it is read afresh before each use.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from crosstalk.core import untrusted
from crosstalk.fs.procinfo import is_same_process
from crosstalk.fs.reading import read_capped

MAX_RECORD_BYTES = 64 * 1024
MAX_RECORDS = 4096
RECORD_NAME = re.compile(r"^([1-9][0-9]{0,9})(-[0-9a-f]{8})?\.json$")
TOKEN = re.compile(r"^[0-9a-f]{64}$")
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def qwen_home(environ: Mapping[str, str]) -> Path:
    home = environ.get("QWEN_HOME")
    if home:
        return Path(home).expanduser()
    user = environ.get("HOME")
    return (Path(user) if user else Path.home()) / ".qwen"


def sessions_dir(environ: Mapping[str, str]) -> Path:
    return qwen_home(environ) / "sessions"


def text_field(record: Mapping[str, Any] | None, key: str) -> str | None:
    value = record.get(key) if record else None
    return value if isinstance(value, str) and value else None


def _own_dir(path: Path) -> bool:
    """A directory (not a symlink to one) owned by this user."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def boot_id() -> str | None:
    raw = read_capped(BOOT_ID, 128)
    return raw.decode(errors="replace").strip() if raw else None


def pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def parse_record(raw: bytes, pid: int) -> dict[str, Any] | None:
    """A record as Qwen writes it for process `pid`, or None: a JSON object of schema 1 naming `pid`, with a
    non-empty string `sessionId`."""
    try:
        data = untrusted.loads(raw, what="a Qwen session record", max_bytes=MAX_RECORD_BYTES)
    except untrusted.UntrustedInput:
        return None
    if not isinstance(data, dict) or data.get("schemaVersion") != 1 or data.get("pid") != pid:
        return None
    return data if text_field(data, "sessionId") else None


def is_live(record: Mapping[str, Any], pid: int) -> bool:
    """The record's process runs now: same pid namespace, same boot, same start ticks (a record without them
    proves nothing on Linux)."""
    started, ns = record.get("procStart"), record.get("pidNs")
    if not isinstance(started, str) or not isinstance(ns, int) or isinstance(ns, bool) or ns != pid_namespace():
        return False
    boot, _, ticks = started.rpartition(":")
    return bool(boot) and boot == boot_id() and is_same_process(pid, ticks)


def _read(path: Path, pid: int) -> dict[str, Any] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        return None  # another user's record is never evidence of a session of ours
    raw = read_capped(path, MAX_RECORD_BYTES)
    record = None if raw is None else parse_record(raw, pid)
    return record if record is not None and is_live(record, pid) else None


def read_record(environ: Mapping[str, str], pid: int) -> dict[str, Any] | None:
    """The live record of Qwen process `pid` (`<pid>.json`), or None. Read afresh on every call."""
    directory = sessions_dir(environ)
    if pid <= 0 or not _own_dir(directory):
        return None
    return _read(directory / f"{pid}.json", pid)


def live_records(environ: Mapping[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(pid, record) for every live record of this user's running processes, in name order. Names of processes
    that do not run or are another user's are skipped before any read, so junk cannot push a real record out."""
    directory = sessions_dir(environ)
    if not _own_dir(directory):
        return
    try:
        with os.scandir(directory) as entries:
            names = sorted(e.name for e in entries if RECORD_NAME.match(e.name))
    except OSError:
        return
    taken = 0
    for name in names:
        match = RECORD_NAME.match(name)
        pid = int(match.group(1)) if match else 0
        if not _own_process(pid):
            continue
        taken += 1
        if taken > MAX_RECORDS:
            return
        record = _read(directory / name, pid)
        if record is not None:
            yield pid, record


def _own_process(pid: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.geteuid()
    except OSError:
        return False


def derived_base(cwd: str | None) -> str:
    """The cwd's basename as Qwen puts it in a name it derives (letters, marks, digits, `.`, `_`, `-`; at most 32)."""
    return "".join(c for c in os.path.basename((cwd or "").rstrip("/")) if c.isalnum() or c in "._-")[:32]


def own_name(record: Mapping[str, Any]) -> str | None:
    """The record's name when the user chose it; None when Qwen derived it: the cwd's basename, `-` and two hex of
    sha256(sessionId). `/clear` keeps the old derived name under the new id, so any two hex count: crosstalk names
    the agent instead, and keeps that name across `/clear`."""
    name = text_field(record, "name")
    if name is None:
        return None
    base, dash, tail = name.rpartition("-")
    derived = dash and base == derived_base(text_field(record, "cwd")) and re.fullmatch(r"[0-9a-f]{2}", tail)
    return None if derived else name


def token_of(record: Mapping[str, Any]) -> str | None:
    token = text_field(record, "ipcToken")
    return token if token and TOKEN.match(token) else None


def socket_problem(path: str | None) -> str | None:
    """Why `path` is not a Qwen inbox crosstalk may connect to (None when it is): an absolute path to a unix socket
    this user owns, not a symlink."""
    if not path or not os.path.isabs(path):
        return "the session published no inbox"
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"its inbox {path} is gone ({exc.strerror or exc})"
    if not stat.S_ISSOCK(st.st_mode):
        return f"its inbox {path} is not a unix socket"
    if st.st_uid != os.geteuid():
        return f"its inbox {path} is owned by uid {st.st_uid}, not by you; refusing to connect"
    return None
