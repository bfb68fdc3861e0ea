"""The `crosstalk capture` side: ask an agent's process to record (a request with an expiry), then collect its
spool into one JSON-lines file: a header line, then one line per frame, redacted again with every agent key and
token on this machine."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crosstalk import __version__
from crosstalk.capture import request as rq
from crosstalk.capture.redact import Redactor, secret_environment
from crosstalk.core import untrusted
from crosstalk.core.errors import CrosstalkError
from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.procinfo import is_same_process, proc_start_time
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.paths import ensure_private_dir

FORMAT = "crosstalk-capture/1"
MAX_KEY_FILES = 1024
REDACTION = (
    "fields named like token, key, secret, authorization, password, credential or cookie; bearer and basic "
    "credentials; well-known API key shapes; this machine's agent keys and bearer tokens; secret-named environment "
    "values"
)


class CaptureError(CrosstalkError):
    """A capture cannot start or be saved; the message says why in one line."""


class Output:
    """The file the capture is saved to. A private temp file beside it is created (and removed) before the capture
    starts, so an unwritable path fails at once and a killed capture leaves nothing behind; `commit` writes the temp
    file again and renames it into place: never through a symlink, always 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.is_dir():
            raise CaptureError(f"{path} is a directory; name a file to write the capture to")
        if not path.parent.is_dir():
            raise CaptureError(f"cannot write {path}: its directory {path.parent} does not exist")
        self.tmp = path.parent / f".{path.name}.{os.getpid()}.capture.tmp"
        try:
            os.close(self._create())
        except OSError as exc:
            raise CaptureError(f"cannot write {path}: {exc.strerror or exc}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)

    def _create(self) -> int:
        return os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def commit(self, data: bytes) -> None:
        try:
            atomic_write(self.path, data, mode=0o600)  # temp + fsync + rename (a symlink at the path is replaced)
        except OSError as exc:
            raise CaptureError(f"cannot write {self.path}: {exc.strerror or exc}") from None


@dataclass
class Running:
    """A capture in progress: its request is on disk until `collect`."""

    root: Path
    desc: Descriptor
    request: rq.CaptureRequest

    @property
    def dir(self) -> Path:
        return rq.capture_dir(self.root)

    def agent_alive(self) -> bool:
        return is_same_process(self.desc.pid, self.desc.started_at)

    def collect(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """End the capture (remove the request, take the spool) and return (records, notes)."""
        agent_id = self.desc.agent_id
        with contextlib.suppress(FileNotFoundError):
            os.unlink(rq.request_path(self.dir, agent_id))
        taken = self.dir / f".{agent_id}.{os.getpid()}.collecting"
        try:
            os.rename(rq.spool_path(self.dir, agent_id), taken)  # the agent appends only to the spool's own name
        except FileNotFoundError:
            return [], {"spool": "missing"}
        try:
            raw = rq.read_private(taken, rq.MAX_SPOOL_BYTES + rq.MAX_RECORD_BYTES)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(taken)
        if raw is None:
            return [], {"spool": "unreadable"}
        return self._records(raw)

    def _records(self, raw: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        redactor = Redactor(known_secrets(self.root))
        start, records, skipped = self.request.created_at, [], 0
        for line in raw.splitlines():
            try:
                rec = untrusted.loads(line, what="a capture spool line", max_bytes=rq.MAX_RECORD_BYTES)
                ts = float(rec["ts"])
            except (ValueError, TypeError, KeyError):
                skipped += 1
                continue
            if not isinstance(rec, dict) or not start <= ts <= self.request.expires_at + rq.CHECK_INTERVAL_S:
                skipped += 1
                continue
            rec = redactor.value(rec)
            rec["ts"], rec["t"] = iso(ts), round(ts - start, 6)
            records.append(rec)
        notes: dict[str, Any] = {"spool_full": len(raw) + rq.MAX_RECORD_BYTES > rq.MAX_SPOOL_BYTES}
        if skipped:
            notes["skipped_lines"] = skipped
        return records, notes


def start(root: Path, desc: Descriptor, seconds: float) -> Running:
    """Write the capture request for `desc`'s process (and an empty spool for it to append to)."""
    directory = rq.capture_dir(root)
    if directory.is_symlink():
        raise CaptureError(f"{directory} is a symlink; remove it and try again")
    try:
        ensure_private_dir(directory)
    except (OSError, CrosstalkError) as exc:
        raise CaptureError(f"cannot use {directory}: {exc}") from None
    sweep(directory)
    existing = rq.read_request(rq.request_path(directory, desc.agent_id))
    if existing is not None and existing.live(time.time()) and _collector_alive(existing):
        until = datetime.fromtimestamp(existing.expires_at).strftime("%H:%M:%S")
        raise CaptureError(
            f"{desc.name} is already being captured (by process {existing.collector_pid}, until {until})"
        )
    if existing is not None or _abandoned(rq.spool_path(directory, desc.agent_id)):
        _remove(directory, desc.agent_id)
    me = os.getpid()
    now = time.time()
    req = rq.CaptureRequest(
        agent_id=desc.agent_id,
        pid=desc.pid,
        started_at=desc.started_at,
        created_at=now,
        expires_at=now + seconds,
        collector_pid=me,
        collector_started_at=proc_start_time(me) or "",
    )
    spool = rq.spool_path(directory, desc.agent_id)
    try:  # created exclusively: of two captures started at once, one goes on
        os.close(os.open(spool, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        raise CaptureError(f"{desc.name} is already being captured (another capture is starting)") from None
    atomic_write(rq.request_path(directory, desc.agent_id), req.to_bytes(), mode=0o600)
    return Running(root, desc, req)


def sweep(directory: Path) -> None:
    """Remove the requests (and spools) of captures whose `crosstalk capture` is gone."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".json")][: rq.MAX_REQUESTS]
    except OSError:
        return
    for name in names:
        req = rq.read_request(directory / name)
        if req is not None and not _collector_alive(req):
            _remove(directory, req.agent_id)


def _abandoned(spool: Path) -> bool:
    """A spool with no request beside it: left by a capture killed as it started, once it is a few seconds old
    (a capture that is starting creates its spool just before its request)."""
    try:
        return time.time() - os.lstat(spool).st_mtime > 5.0
    except FileNotFoundError:
        return False


def _collector_alive(req: rq.CaptureRequest) -> bool:
    return is_same_process(req.collector_pid, req.collector_started_at)


def _remove(directory: Path, agent_id: str) -> None:
    for path in (rq.request_path(directory, agent_id), rq.spool_path(directory, agent_id)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def known_secrets(root: Path) -> list[str]:
    """Every agent key and bearer token under `root` (read capped, never through a symlink), and this process's
    secret-named environment values."""
    found = secret_environment(os.environ)
    for sub, suffix in (("sock", ".key"), ("credentials", ".cred")):
        try:
            with os.scandir(root / sub) as entries:
                names = [e.name for e in entries if e.name.endswith(suffix)][:MAX_KEY_FILES]
        except OSError:
            continue
        for name in names:
            raw = rq.read_private(root / sub / name, 4096)
            if raw and raw.strip():
                found.append(raw.decode("utf-8", errors="replace").strip())
    return found


def document(running: Running, records: list[dict[str, Any]], notes: dict[str, Any], ended: str) -> bytes:
    """The capture file: one header line naming crosstalk, the harness, the agent and the window; then the records."""
    desc, req = running.desc, running.request
    header = {
        "format": FORMAT,
        "crosstalk": __version__,
        "harness": desc.harness,
        "harness_version": desc.harness_version,
        "agent": {"name": desc.name, "agent_id": desc.agent_id, "role": desc.role, "pid": desc.pid},
        "window": {"start": iso(req.created_at), "end": iso(time.time()), "seconds": req.expires_at - req.created_at},
        "ended": ended,
        "records": len(records),
        "channels": dict(sorted(Counter(str(r.get("channel")) for r in records).items())),
        "redacted": REDACTION,
        **notes,
    }
    lines = [json.dumps(header, ensure_ascii=False, separators=(",", ":"))]
    lines += [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
    return ("\n".join(lines) + "\n").encode("utf-8", errors="replace")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
