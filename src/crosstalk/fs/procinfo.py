"""Process identity from /proc (Linux): pid + kernel start time names one process, even across pid reuse."""

from __future__ import annotations

import os

from crosstalk.fs.reading import read_capped

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from typing import Any

_STARTTIME_INDEX = 22 - 3  # field 22 of /proc/<pid>/stat; the split after ')' starts at field 3 (state)
_GONE_STATES = (b"Z", b"X")  # zombie / dead: the process has exited even though its pid still resolves


_STAT_PATH = "/proc/{}/stat"
_STAT_MAX = 64 * 1024  # the file is ~300 bytes; a cap, not a size the kernel gives


def _read_stat(pid: int) -> bytes | None:
    """/proc/<pid>/stat's bytes, read by os.read, not a buffered file object: a sending shim proves its target live
    per message (registry/discovery.py is_live), and `open()` with its BufferedReader costs ~2x the syscalls' time."""
    try:
        fd = os.open(_STAT_PATH.format(pid), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = [os.read(fd, 4096)]
        while chunks[-1] and sum(map(len, chunks)) < _STAT_MAX:  # procfs gives it in one read; to EOF all the same
            chunks.append(os.read(fd, 4096))
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields 3.. of /proc/<pid>/stat, or None if the process is not there."""
    if pid <= 0:
        return None
    data = _read_stat(pid)
    if data is None:
        return None
    # comm (field 2) may hold spaces and parens, e.g. "(a) (b)"; only the last ')' ends it.
    _, sep, rest = data.rpartition(b")")
    fields = rest.split()
    if not sep or len(fields) <= _STARTTIME_INDEX:
        return None
    return fields


def proc_start_time(pid: int) -> str | None:
    """The process start time in clock ticks since boot, as a string; None when the pid does not exist."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[_STARTTIME_INDEX].decode("ascii")


def pid_alive(pid: int) -> bool:
    """True when pid names a running (not zombie) process, ours or another user's."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists but belongs to someone else
    fields = _stat_fields(pid)
    return fields is None or fields[0] not in _GONE_STATES


def is_same_process(pid: int, started_at: str | None) -> bool:
    """True only when pid is running and started at started_at: a reused pid has another start time."""
    if not started_at:
        return False
    fields = _stat_fields(pid)
    if fields is None or fields[0] in _GONE_STATES:
        return False
    return fields[_STARTTIME_INDEX].decode("ascii") == started_at


KEPT_MAX = 64
_kept: dict[tuple[int, str], tuple[int, Any]] = {}  # (pid, start time) → (its pidfd, a poll object on it)


def is_same_process_kept(pid: int, started_at: str | None) -> bool:
    """is_same_process for a long-lived caller asking about the same few processes again and again (a sending shim
    proves its target live per message). The first proof keeps a pidfd on the process, opened before its start time
    is read from /proc, so it names exactly the process whose start time matched (a reused pid is another process);
    later calls ask the pidfd alone: it turns readable the moment that process exits, a zombie included. One poll,
    not the /proc read (open, two reads, close). Where pidfds are not to be had (an older kernel, a sandbox), the
    /proc read every time. Used from one thread (the caller's event loop); at most KEPT_MAX pidfds are kept."""
    if not started_at or pid <= 0:
        return False
    key = (pid, started_at)
    kept = _kept.get(key)
    if kept is not None:
        if not kept[1].poll(0):
            return True
        _forget(key)  # it exited: a later process with this pid has another start time
        return False
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # ESRCH: gone (and the /proc read says so too); ENOSYS, EPERM: no pidfd here
        return is_same_process(pid, started_at)
    if not is_same_process(pid, started_at):
        os.close(fd)
        return False
    import select  # here: `crosstalk send` proves a target once and never loads it

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if len(_kept) >= KEPT_MAX:
        for old in list(_kept):
            _forget(old)
    _kept[key] = (fd, poller)
    return True


def _forget(key: tuple[int, str]) -> None:
    kept = _kept.pop(key, None)
    if kept is not None:
        os.close(kept[0])


MAX_ENVIRON = 1024 * 1024


def process_environ(pid: int) -> dict[str, str] | None:
    """The environment process `pid` was started with; None when it cannot be read (gone, another user's)."""
    raw = read_capped(f"/proc/{pid}/environ", MAX_ENVIRON)
    if not raw:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def login_name() -> str | None:
    """This user's login name: $USER or $LOGNAME, else the password database; None when nothing names it."""
    name = os.environ.get("USER") or os.environ.get("LOGNAME")
    if name:
        return name
    import pwd  # only when the environment does not say

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return None


def own_pids() -> list[int]:
    """The pids of this user's processes (those whose /proc entry it owns)."""
    uid = os.getuid()
    pids = []
    try:
        entries = os.scandir("/proc")
    except OSError:
        return []
    with entries:
        for entry in entries:
            if entry.name.isdigit():
                try:
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        pids.append(int(entry.name))
                except OSError:
                    continue  # gone meanwhile
    return pids


def process_argv(pid: int) -> list[str] | None:
    """The command line of process `pid`; None when it cannot be read (gone, another user's, a kernel thread)."""
    raw = read_capped(f"/proc/{pid}/cmdline", MAX_ENVIRON)
    if not raw:
        return None
    return [os.fsdecode(a) for a in raw.rstrip(b"\0").split(b"\0")]


def process_cwd(pid: int) -> str | None:
    """The working directory of process `pid`; None when it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
