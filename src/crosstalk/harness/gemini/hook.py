"""The command crosstalk's install adds to Gemini CLI's hooks: `python -m crosstalk.harness.gemini.hook EVENT`.

Gemini runs it on its own session's events with a JSON object on stdin (`session_id`, `cwd`, `hook_event_name`, …)
and reads one JSON object from its stdout. On every event it records `{Gemini process → session id}`
(harness/gemini/sessions.py), which is how the session's shim proves who calls. Then:

- `BeforeAgent` (the user sent a prompt; the turn starts) and `AfterTool` (a tool call of the running turn ended):
  it asks the shim's socket for what is queued for this session, prints it as `hookSpecificOutput.additionalContext`
  (Gemini appends it to the prompt, or to the tool's result: the model reads it in its next request), and only
  after that write tells the shim which messages it handed over;
- `AfterAgent` (the turn ended): it tells the shim the session is idle;
- `SessionStart`: the record, after removing those of Gemini processes that ended.

It never fails Gemini: any problem prints `{}` (no context) and exits 0. No shim listening: nothing is queued.
The record is written after the exchange with the shim.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys

from crosstalk.harness.gemini.sessions import gemini_pid, prune, run_dir, socket_path, write_record

TYPE_CHECKING = False  # not `typing`: this module is on the path of a hook Gemini runs on every tool call
if TYPE_CHECKING:
    from typing import Any

MAX_STDIN = 4 * 1024 * 1024
MAX_ANSWER = 8 * 1024 * 1024
TIMEOUT_S = 3.0
ASKS = frozenset({"BeforeAgent", "AfterTool", "AfterAgent"})


def _lines(conn: socket.socket) -> Any:
    buf = b""
    while len(buf) < MAX_ANSWER:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line


def ask(path: str, event: str, session_id: str, emit: Any) -> list[str]:
    """One exchange with the shim: tell it `event`, and emit what it hands over; returns the ids handed over."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(TIMEOUT_S)
        conn.connect(path)
        conn.sendall(json.dumps({"event": event, "sessionId": session_id}).encode() + b"\n")
        answer = json.loads(next(_lines(conn), b"{}") or b"{}")
        ids = [i for i in answer.get("ids") or [] if isinstance(i, str)] if isinstance(answer, dict) else []
        context = answer.get("context") if isinstance(answer, dict) else None
        if not ids or not isinstance(context, str):
            emit({})
            return []
        emit({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}})
        conn.sendall(json.dumps({"handed": ids}).encode() + b"\n")  # after the write to Gemini: handed over
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_WR)
            next(_lines(conn), None)  # the shim's close: it has read the hand-over
        return ids


def main(argv: list[str]) -> int:
    printed = False

    def emit(obj: dict[str, Any]) -> None:
        nonlocal printed
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()
        printed = True

    try:
        event = argv[0] if argv else ""
        data = json.loads(sys.stdin.buffer.read(MAX_STDIN) or b"{}")
        session_id = data.get("session_id") if isinstance(data, dict) else None
        directory = run_dir(os.environ, create=True)
        if isinstance(session_id, str) and session_id and directory is not None:
            if event == "SessionStart":
                prune(directory)
            pid = gemini_pid(os.getppid())
            cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
            path = socket_path(directory, pid)
            try:
                if event in ASKS and path.exists():
                    ask(str(path), event, session_id, emit)
            finally:  # after the exchange: a record saying AfterAgent means the shim knows the turn ended
                write_record(directory, pid, session_id, cwd, event)
    except Exception:  # a hook never fails its session
        pass
    if not printed:
        emit({})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
