"""`crosstalk agent start` and `agent stop`: a standalone agent in the background.

`start` runs `crosstalk agent run` with the same options as a detached process whose output goes to a log file, and
returns only once the agent is registered and serving (its ready line), so a `crosstalk send` typed next reaches it.
It prints what `agent run` prints when ready; a start that fails prints the agent's own error and its exit code.
`stop` sends SIGTERM to a standalone agent's process (never a session's shim) and waits until it is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from crosstalk.cli.common import echo, fail, state_paths
from crosstalk.core.errors import ErrorKind

START_TIMEOUT_S = 60.0  # a cold interpreter on a loaded machine, plus the journal replay of a long-lived agent
STOP_TIMEOUT_S = 15.0
LOG_READ_CAP = 64 * 1024  # what is read of the log to find the ready line or the error


def run_start(args: Any) -> int:
    argv = sys.argv[1:]
    if argv[:2] != ["agent", "start"]:  # only the command line names the options to pass on, as typed
        fail("agent start must be run as `crosstalk agent start OPTIONS`", ErrorKind.USAGE)
    options = [a for a in argv[2:] if a != "--json"]
    if args.log is not None:  # `--log FILE` / `--log=FILE` are start's own
        at = next(i for i, a in enumerate(options) if a == "--log" or a.startswith("--log="))
        del options[at : at + (1 if options[at].startswith("--log=") else 2)]
    paths = state_paths()
    log = Path(args.log) if args.log else paths.root / "logs" / f"agent-{_file_safe(args.name)}.log"
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    start = os.fstat(fd).st_size
    cmd = [sys.executable, "-m", "crosstalk", "agent", "run", *options, "--json"]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True)
    finally:
        os.close(fd)
    ready = _wait_ready(proc, log, start)
    if args.as_json:
        print(json.dumps({**ready, "log": str(log)}), flush=True)
    else:
        echo(
            f"agent {ready['name']} ({ready['agent_id']}) ready on {ready['uds_path']} (pid {ready['pid']}, log {log})"
        )
        if ready.get("notice"):
            echo(f"note: {ready['notice']}")
    return 0


def _wait_ready(proc: subprocess.Popen[bytes], log: Path, start: int) -> dict[str, Any]:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        lines = _read_from(log, start)
        for line in lines:
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("event") == "ready" and event.get("pid") == proc.pid:
                    return event
        code = proc.poll()
        if code is not None:
            lines = _read_from(log, start)  # all it wrote before it exited
            said = next((ln for ln in reversed(lines) if ln.startswith("crosstalk: ")), "")
            why = said.removeprefix("crosstalk: ") or f"see {log}"
            fail(f"the agent did not start: {why}", _kind_of_exit(code))
        if time.monotonic() > deadline:
            proc.terminate()
            fail(f"the agent was not ready within {START_TIMEOUT_S:.0f} s and was stopped; see {log}")
        time.sleep(0.02)


def _kind_of_exit(code: int) -> ErrorKind:
    """The kind whose exit code `agent run` exited with (a usage error stays 2, no such --parent stays 4)."""
    from crosstalk.core.errors import exit_code

    return next((k for k in (ErrorKind.USAGE, ErrorKind.NO_AGENT, ErrorKind.REJECTED) if exit_code(k) == code),
                ErrorKind.FAILED)  # fmt: skip


def _read_from(log: Path, start: int) -> list[str]:
    try:
        with open(log, "rb") as f:
            f.seek(start)
            data = f.read(LOG_READ_CAP)
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()


def _file_safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:64] or "agent"


def run_stop(args: Any) -> int:
    from crosstalk.fs.procinfo import is_same_process
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.errors import RegistryError

    try:
        desc = resolve(state_paths(), args.name)
    except RegistryError as exc:
        fail(str(exc), ErrorKind.NO_AGENT)
    if not _is_standalone(desc.pid):
        fail(
            f"{desc.name} is served by a session's crosstalk (pid {desc.pid}), not a standalone agent: end the session"
        )
    os.kill(desc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while is_same_process(desc.pid, desc.started_at):
        if time.monotonic() > deadline:
            fail(f"{desc.name} (pid {desc.pid}) did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM")
        time.sleep(0.02)
    echo(f"agent {desc.name} stopped (pid {desc.pid})")
    return 0


def _is_standalone(pid: int) -> bool:
    """Whether `pid` runs `crosstalk agent run` (what start and a user's own `agent run` start)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read(64 * 1024).split(b"\0")
    except OSError:
        return False
    return any(argv[i : i + 2] == [b"agent", b"run"] for i in range(len(argv) - 1))
