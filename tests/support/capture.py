"""Running `crosstalk capture` as a real process: start it, wait for it to say it is capturing, read its file."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

START_S = 15.0
END_S = 30.0


# The command starts with SIGINT ignored, as a background job of a non-interactive shell does: Ctrl-C (SIGINT)
# must stop a capture all the same. exec keeps the ignored disposition and the pid.
IGNORING_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"
)


def start_capture(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """`crosstalk capture …`, returned once it says it is capturing (every process of the agent has seen the
    request by then)."""
    proc = subprocess.Popen([sys.executable, "-c", IGNORING_SIGINT, *cmd], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        line = _stderr_line(proc, START_S)
        assert line.startswith(b"capturing "), line
    except BaseException:
        stop(proc)
        raise
    return proc


def _stderr_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stderr is not None
    fd, buf = proc.stderr.fileno(), b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        assert left > 0, f"crosstalk capture said nothing within {timeout} s: {buf!r}"
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"crosstalk capture exited: {buf!r}"
            buf += chunk
    return buf.split(b"\n", 1)[0]


def finish(proc: subprocess.Popen[bytes], timeout: float = END_S) -> tuple[int, str, str]:
    """Wait for `crosstalk capture` to end by itself: (exit code, stdout, stderr)."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode(), err.decode()


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def read_capture(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, records) of a capture file, checking it is a private regular file."""
    st = os.lstat(path)
    assert oct(st.st_mode & 0o777) == oct(0o600) and not path.is_symlink()
    header, *records = [json.loads(line) for line in path.read_text().splitlines()]
    assert header["records"] == len(records)
    return header, records


def secrets_of(root: Path, agent_id: str) -> list[str]:
    """The agent's socket key and bearer token, as they are on disk."""
    found = []
    for path in (root / "sock" / f"{agent_id}.key", root / "credentials" / f"{agent_id}.cred"):
        if path.exists():
            found.append(path.read_text().strip())
    assert found and all(len(s) >= 16 for s in found)
    return found


def capture_dir_is_empty(root: Path) -> bool:
    directory = root / "capture"
    return not directory.exists() or not any(directory.iterdir())
