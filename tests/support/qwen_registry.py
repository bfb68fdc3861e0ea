"""Qwen Code registry records for tests: a live record of this very process (its pid, start ticks, boot and pid
namespace), written where a session's would be."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.qwen.sessions import boot_id, pid_namespace


def record(pid: int = 0, **over: object) -> dict[str, object]:
    pid = pid or os.getpid()
    base: dict[str, object] = {
        "schemaVersion": 1, "pid": pid, "procStart": f"{boot_id()}:{proc_start_time(pid)}", "pidNs": pid_namespace(),
        "sessionId": "8e016be8-5b48-4c13-ad22-1f5326ae64ac", "cwd": "/home/me/project", "name": "project-3f",
        "kind": "tui", "ipcPath": "/nonexistent.sock", "ipcToken": "ab" * 32,
    }  # fmt: skip
    return {**base, **over}


def write(home: Path, data: dict[str, object], name: str | None = None) -> Path:
    sessions = home / "sessions"
    sessions.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = sessions / (name or f"{data['pid']}.json")
    path.write_text(json.dumps(data))
    return path
