"""The capture request and spool files, shared by `crosstalk capture` (which writes the request and collects the
spool) and the agent's process (which reads the request and appends to the spool).

Both live in <state root>/capture/ (0700): `<agent_id>.json` is the request (0600, a few hundred bytes) naming the
process to record and when the capture ends; `<agent_id>.spool` is the JSON-lines spool (0600). `crosstalk capture`
creates the spool; the agent's process only ever appends to an existing one, so a capture that was collected (its
spool renamed away) gets no more lines.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from crosstalk.core import untrusted
from crosstalk.core.ids import is_agent_id

DIR_NAME = "capture"
VERSION = 1
MAX_SECONDS = 3600.0  # one capture records at most an hour
MAX_REQUEST_BYTES = 4096
MAX_REQUESTS = 64  # request files read in one scan of the capture dir
MAX_RECORD_BYTES = 64 * 1024  # one spool line, after redaction
MAX_FRAME_BYTES = 256 * 1024  # the part of one frame that is kept (and redacted); the rest is only counted
MAX_SPOOL_BYTES = 32 * 1024 * 1024  # the spool stops growing here
CHECK_INTERVAL_S = 1.0  # an agent's process looks for a request at most this often (and only when a frame passes)


@dataclass(frozen=True, slots=True)
class CaptureRequest:
    agent_id: str
    pid: int  # the agent's serving process (the descriptor's pid) and its kernel start time
    started_at: str
    created_at: float  # unix time
    expires_at: float
    collector_pid: int  # the `crosstalk capture` process
    collector_started_at: str
    v: int = VERSION

    def live(self, now: float) -> bool:
        return self.created_at <= now < self.expires_at

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_bytes(cls, raw: bytes) -> CaptureRequest | None:
        """The request in `raw`, or None when it is not a well-formed one."""
        try:
            data = untrusted.loads(raw, what="a capture request", max_bytes=MAX_REQUEST_BYTES)
            req = cls(
                agent_id=str(data["agent_id"]),
                pid=int(data["pid"]),
                started_at=str(data["started_at"]),
                created_at=float(data["created_at"]),
                expires_at=float(data["expires_at"]),
                collector_pid=int(data["collector_pid"]),
                collector_started_at=str(data["collector_started_at"]),
                v=int(data.get("v", VERSION)),
            )
        except (ValueError, TypeError, KeyError):
            return None
        ok = req.v == VERSION and is_agent_id(req.agent_id) and req.expires_at - req.created_at <= MAX_SECONDS + 1
        return req if ok else None


def capture_dir(root: Path) -> Path:
    return root / DIR_NAME


def request_path(directory: Path, agent_id: str) -> Path:
    return directory / f"{agent_id}.json"


def spool_path(directory: Path, agent_id: str) -> Path:
    return directory / f"{agent_id}.spool"


def read_private(path: Path | str, limit: int) -> bytes | None:
    """The file at `path` when it is a regular file of this user's no larger than `limit`, read without following
    a symlink or blocking on a FIFO; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def read_request(path: Path | str) -> CaptureRequest | None:
    raw = read_private(path, MAX_REQUEST_BYTES)
    return None if raw is None else CaptureRequest.from_bytes(raw)
