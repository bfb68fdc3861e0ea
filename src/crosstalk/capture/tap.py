"""The agent-process side of `crosstalk capture`: the taps the MCP stdio and the socket ingress call (installed
into ingress/taps.py by `install`), the Codex app-server client's observer, and the recorder behind them.

Off, a hook costs a clock read per frame: the capture dir is stat'ed at most once per CHECK_INTERVAL_S, and only
when a frame passes; it is read only when its mtime changed. On (a live request names this process), each frame is
redacted and appended to the request's spool as one JSON line: when, which channel and direction, the frame's size,
and the redacted frame. Nothing a hook does can fail the traffic it watches.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from crosstalk.capture import request as rq
from crosstalk.fs.procinfo import is_same_process, proc_start_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from crosstalk.capture.redact import Redactor

log = logging.getLogger(__name__)
_KEY_FILE_BYTES = 4096
_CODEX_CLIENT = "crosstalk.harness.codex.appserver"  # loaded only where a Codex agent binds
_codex_hooked = False
_connections = itertools.count(1)


class Recorder:
    """The live capture requests for this process under one state root, refreshed lazily."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = rq.capture_dir(root)
        self._checked = -rq.CHECK_INTERVAL_S
        self._mtime: int | None = None
        self._requests: tuple[rq.CaptureRequest, ...] = ()
        self._redactor: Redactor | None = None  # loaded with the first live request: off, it costs no import
        self._me: tuple[int, str | None] | None = None

    def active(self, agent_id: str | None = None) -> tuple[rq.CaptureRequest, ...]:
        """The requests live now for this process (and for `agent_id`, when the frame belongs to one agent)."""
        if not _codex_hooked:
            _hook_codex()
        now = time.monotonic()
        if now - self._checked >= rq.CHECK_INTERVAL_S:
            self._checked = now
            self._refresh()
            if self._requests:  # a `crosstalk capture` that was killed collects nothing: stop recording for it
                self._requests = tuple(
                    r for r in self._requests if is_same_process(r.collector_pid, r.collector_started_at)
                )
        if not self._requests:
            return ()
        wall = time.time()
        return tuple(r for r in self._requests if r.live(wall) and agent_id in (None, r.agent_id))

    def _refresh(self) -> None:
        try:
            st = os.lstat(self.dir)  # a symlink in its place is not the capture dir
        except OSError:
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            self._mtime, self._requests = None, ()
            return
        mtime = st.st_mtime_ns
        if mtime == self._mtime:
            return
        # A directory changed in the last two seconds is read again at the next check: two changes within one
        # timestamp tick (a coarse-grained file system) must not hide the second.
        self._mtime = mtime if time.time_ns() - mtime > 2_000_000_000 else None
        pid = os.getpid()
        if self._me is None or self._me[0] != pid:  # the start time is read once (again after a fork)
            self._me = (pid, proc_start_time(pid))
        try:
            names = sorted(n for n in os.listdir(self.dir) if n.endswith(".json"))[: rq.MAX_REQUESTS]
        except OSError:
            names = []
        found = [rq.read_request(self.dir / n) for n in names]
        mine = tuple(r for r in found if r is not None and (r.pid, r.started_at) == self._me)
        self._requests = mine
        if mine:
            from crosstalk.capture.redact import Redactor

            self._redactor = Redactor(self._known_secrets(mine))

    def _known_secrets(self, requests: tuple[rq.CaptureRequest, ...]) -> list[str]:
        from crosstalk.capture.redact import secret_environment

        known = secret_environment(os.environ)
        for r in requests:
            for path in (self.root / "sock" / f"{r.agent_id}.key", self.root / "credentials" / f"{r.agent_id}.cred"):
                raw = rq.read_private(path, _KEY_FILE_BYTES)
                if raw and raw.strip():
                    known.append(raw.decode("utf-8", errors="replace").strip())
        return known

    def record(
        self,
        requests: tuple[rq.CaptureRequest, ...],
        channel: str,
        direction: str,
        frame: bytes,
        *,
        size: int | None = None,
        conn: int | None = None,
        agent_id: str | None = None,
    ) -> None:
        """Append one redacted frame to each request's spool (`size`: the frame's full length, when `frame` is cut)."""
        try:
            line = self._line(channel, direction, frame, size, conn, agent_id)
            for r in requests:
                _append(rq.spool_path(self.dir, r.agent_id), line)
        except Exception:  # a capture must never break the traffic it records
            log.debug("capture: could not record a %s frame", channel, exc_info=True)

    def _line(
        self, channel: str, direction: str, frame: bytes, size: int | None, conn: int | None, agent_id: str | None
    ) -> bytes:
        now = time.time()
        full = len(frame) if size is None else size
        out: dict[str, Any] = {"ts": round(now, 6), "channel": channel, "direction": direction, "bytes": full}
        if conn is not None:
            out["conn"] = conn
        if agent_id is not None:
            out["agent_id"] = agent_id
        if self._redactor is None:
            raise RuntimeError("no live capture request")  # record() is only called with live requests
        kind, value = self._redactor.frame(frame, cut=full > len(frame))
        out[kind] = value
        if full > len(frame):
            out["truncated"] = True
        line = json.dumps(out, ensure_ascii=False, separators=(",", ":"))
        if len(line.encode()) > rq.MAX_RECORD_BYTES:  # cut after redaction, so no secret is cut in half and kept
            shown = value if kind == "text" else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            out.pop(kind)
            out["text"], out["truncated"] = shown[: rq.MAX_RECORD_BYTES // 2], True
            line = json.dumps(out, ensure_ascii=False, separators=(",", ":"))
        return line.encode("utf-8", errors="replace") + b"\n"


def _append(path: Path, line: bytes) -> None:
    """Append to an existing spool (never create one, never through a symlink) while it is under its cap."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return  # collected already, or never started
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_size + len(line) <= rq.MAX_SPOOL_BYTES:
            os.write(fd, line)
    finally:
        os.close(fd)


_recorders: dict[Path | None, Recorder] = {}


def recorder(root: Path | None = None) -> Recorder:
    """The recorder for `root` (default: this process's state root, from the environment, read once)."""
    found = _recorders.get(root)
    if found is None and root is None:
        from crosstalk.registry.paths import StatePaths

        found = _recorders[None] = recorder(StatePaths.from_env().root)
    if found is None:
        found = _recorders[root] = Recorder(root)  # type: ignore[arg-type]
    return found


class _Lines:
    """Cut a byte stream into lines and record each while a capture is live (partial lines are kept only then)."""

    __slots__ = ("agent_id", "buf", "channel", "conn", "direction", "lost", "rec", "tail")

    def __init__(self, rec: Recorder, channel: str, direction: str, conn: int | None, agent_id: str | None) -> None:
        self.rec, self.channel, self.direction, self.conn, self.agent_id = rec, channel, direction, conn, agent_id
        self.buf = bytearray()
        self.lost = 0  # bytes of the current line past MAX_FRAME_BYTES
        self.tail = False  # the capture began inside a line: its rest is not a frame

    def feed(self, data: bytes) -> None:
        try:
            requests = self.rec.active(self.agent_id)
            if not requests:
                self.buf.clear()
                self.lost = 0
                self.tail = not data.endswith(b"\n") if data else self.tail
                return
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                self._keep(data[start:end])
                if self.tail:
                    self.tail = False
                elif self.buf.strip():
                    size = len(self.buf) + self.lost
                    self.rec.record(
                        requests, self.channel, self.direction, bytes(self.buf), size=size, conn=self.conn,
                        agent_id=self.agent_id,
                    )  # fmt: skip
                self.buf.clear()
                self.lost = 0
                start = end + 1
            self._keep(data[start:])
        except Exception:
            log.debug("capture: tap failed", exc_info=True)

    def _keep(self, piece: bytes) -> None:
        room = max(0, rq.MAX_FRAME_BYTES - len(self.buf))
        self.buf += piece[:room]
        self.lost += max(0, len(piece) - room)


def tap_reader(reader: Any, channel: str, *, root: Path | None = None, agent_id: str | None = None) -> Any:
    """Record the lines fed to an asyncio.StreamReader (as direction "in"); returns the reader."""
    lines = _Lines(recorder(root), channel, "in", None, agent_id)
    return _wrap(reader, "feed_data", lines)


def tap_writer(writer: Any, channel: str, *, root: Path | None = None, agent_id: str | None = None) -> Any:
    """Record the lines written to a writer (as direction "out"); returns the writer."""
    lines = _Lines(recorder(root), channel, "out", None, agent_id)
    return _wrap(writer, "write", lines)


def tap_connection(reader: Any, writer: Any, socket_path: Path) -> None:
    """A connection accepted on an agent's socket (<root>/sock/<agent_id>.sock): record its lines both ways."""
    rec, agent_id, conn = recorder(socket_path.parent.parent), socket_path.stem, next(_connections)
    _wrap(reader, "feed_data", _Lines(rec, "socket", "in", conn, agent_id))
    _wrap(writer, "write", _Lines(rec, "socket", "out", conn, agent_id))


def _wrap(obj: Any, method: str, lines: _Lines) -> Any:
    inner = getattr(obj, method)

    def tapped(data: bytes) -> Any:
        lines.feed(data)
        return inner(data)

    setattr(obj, method, tapped)  # on the instance: whoever feeds or writes it already holds this object
    return obj


class _CaptureTaps:
    """This recorder behind ingress/taps.py's hook points."""

    def reader(self, reader: Any, channel: str) -> Any:
        return tap_reader(reader, channel)

    def writer(self, writer: Any, channel: str) -> Any:
        return tap_writer(writer, channel)

    def connection(self, reader: Any, writer: Any, socket_path: Path) -> None:
        tap_connection(reader, writer, socket_path)


def install() -> None:
    """Record this process's MCP stdio and socket connections whenever a capture request names it (a process that
    serves agents calls it once, before it opens them)."""
    from crosstalk.ingress import taps

    taps.install(_CaptureTaps())


def observe_app_server(direction: str, frame: str | bytes) -> None:
    """One WebSocket message to ("out") or from ("in") a Codex app-server."""
    try:
        rec = recorder()
        requests = rec.active()
        if requests:
            data = frame.encode("utf-8", errors="replace") if isinstance(frame, str) else frame
            rec.record(requests, "app-server", direction, data[: rq.MAX_FRAME_BYTES], size=len(data))
    except Exception:
        log.debug("capture: app-server tap failed", exc_info=True)


def _hook_codex() -> None:
    """Tell the Codex app-server client, once it is loaded, to report its messages here. The harness layer imports
    nothing above it, and importing it here would cost every process its load time: so it is looked up, at each
    frame until found (a dict lookup), and a Codex agent's first tools/call answer finds it."""
    global _codex_hooked
    module: Any = sys.modules.get(_CODEX_CLIENT)  # looked up, not imported, so its attributes are unknown here
    if module is not None:
        module.frame_observer = observe_app_server
        _codex_hooked = True


_hook_codex()
