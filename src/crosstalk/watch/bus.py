"""Each bus transport known on this machine, and its dispatcher here: what `crosstalk status` shows, read from the
heartbeat the dispatcher writes, its lock, cursor and held files, and the work tree's HEAD.

The one git call (how many commits wait after the cursor) runs only when HEAD or the cursor moved, judged by the
mtime and size of the files git and the dispatcher write; every other read is a small file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crosstalk.bus.errors import BusError
from crosstalk.bus.git.command import run_git
from crosstalk.bus.git.locks import git_dir
from crosstalk.bus.transport.state import TransportState, dispatcher_pid, read_cursor, read_json, transport_state
from crosstalk.bus.transport.transports import TransportInfo, list_transports
from crosstalk.watch.records import TransportView

GIT_TIMEOUT_S = 5.0

Signature = tuple[tuple[int, int, int], ...]


def _sig(*files: Path) -> Signature:
    out = []
    for f in files:
        try:
            st = os.stat(f)
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((0, 0, 0))
    return tuple(out)


class BusReader:
    """Reads every transport; remembers HEAD and the unscanned count per transport until their files change."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self._git: dict[str, tuple[Signature, str | None, int | None]] = {}

    def watch_dirs(self) -> list[Path]:
        """The directories whose changes change what read() returns."""
        state_root = transport_state("x", self.environ).dir.parent
        dirs = [state_root.parent / "transports", state_root]
        for info in list_transports(self.environ):
            gdir = git_dir(info.root)
            dirs += [transport_state(info.name, self.environ).dir, gdir, gdir / "logs"]
        return dirs

    def read(self) -> tuple[TransportView, ...]:
        infos = list_transports(self.environ)
        known = {i.name for i in infos}
        self._git = {k: v for k, v in self._git.items() if k in known}
        return tuple(self._view(info) for info in infos)

    def _view(self, info: TransportInfo) -> TransportView:
        state = transport_state(info.name, self.environ)
        pid = dispatcher_pid(state)
        raw = read_json(state.heartbeat)
        beat: dict[str, Any] = raw if isinstance(raw, dict) else {}
        age: float | None = None
        try:
            age = round(max(0.0, time.time() - state.heartbeat.stat().st_mtime), 3)
        except OSError:
            pass
        cursor = read_cursor(state)
        head, unscanned = self._head(info, state, cursor) if info.problem is None else (None, None)
        held = read_json(state.held)
        held_list = held.get("held") if isinstance(held, dict) else None
        return TransportView(
            name=info.name,
            root=str(info.root),
            alias=info.alias,
            problem=info.problem,
            running=pid is not None,
            pid=pid if pid is not None and pid > 0 else None,
            heartbeat_age_s=age,
            last_tick_at=_num(beat.get("last_tick_at")),
            interval=_num(beat.get("interval")),
            halted=beat.get("halted") if isinstance(beat.get("halted"), str) else None,
            cursor=cursor,
            head=head,
            unscanned_commits=unscanned,
            held=len(held_list) if isinstance(held_list, list) else _int(beat.get("held")),
            dispatched=_int(beat.get("dispatched")),
            failed=_int(beat.get("failed")),
            errors=_int(beat.get("errors")),
        )

    def _head(self, info: TransportInfo, state: TransportState, cursor: str | None) -> tuple[str | None, int | None]:
        gdir = git_dir(info.root)
        sig = _sig(gdir / "HEAD", gdir / "logs" / "HEAD", gdir / "packed-refs", state.cursor)
        cached = self._git.get(info.name)
        if cached is not None and cached[0] == sig:
            return cached[1], cached[2]
        head: str | None = None
        unscanned: int | None = None
        try:
            found = run_git(["rev-parse", "-q", "--verify", "HEAD"], cwd=info.root, timeout=GIT_TIMEOUT_S)
            head = found.strip() or None
            if head is not None and cursor is not None:
                count = run_git(["rev-list", "--count", f"{cursor}..{head}"], cwd=info.root, timeout=GIT_TIMEOUT_S)
                unscanned = int(count.strip())
            elif head is not None:
                unscanned = None  # no dispatcher has run here: nothing says where it would start
        except (BusError, ValueError):
            pass
        self._git[info.name] = (sig, head, unscanned)
        return head, unscanned


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
