"""Run one headless agent CLI invocation under the command contract below, with a hard timeout.

The contract: argv = the command (already split on whitespace, never a shell line) + the prompt as the final
positional argument; a prompt
over 64 KiB (or one holding a NUL, which argv cannot carry) goes on stdin instead, with no positional. The model
runs in its own process group so a timeout ends it and everything it spawned (SIGTERM, 2 s, SIGKILL); so does a
`cancel` event (the dispatcher stopping), which ends the run with INTERRUPTED as its error.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from crosstalk.bus.protocol.message import MAX_BODY_BYTES

STDIN_THRESHOLD = 65536  # prompt bytes above this go on stdin (Linux caps one argv string at 128 KiB)
# The reply body: never more than a reply may hold (a larger reply would be refused by every reader). What is over
# it is dropped and counted (RunResult.stdout_dropped); the dispatcher answers such a run with a failed reply.
STDOUT_CAP = MAX_BODY_BYTES
STDERR_CAP = 1024 * 1024  # only the tail matters (for the error text)
TERM_GRACE_S = 2.0
# After the model exits, how long leftovers of its process group may keep our pipes open before they are killed.
EXIT_DRAIN_S = 1.0
_POLL_S = 0.1  # how often a run notices its cancel event (and the model's exit) while output is quiet
INTERRUPTED = "interrupted: the dispatcher is stopping"
_READ_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class RunResult:
    ok: bool
    stdout: str
    stderr: str
    exit_code: int | None  # None when the process never started; negative when a signal ended it
    timed_out: bool
    duration_s: float
    error: str | None  # one line when not ok
    interrupted: bool = False  # the cancel event ended the run: it has no outcome and should run again
    stdout_dropped: int = 0  # stdout bytes past STDOUT_CAP, not kept


def build_argv(command: Sequence[str], prompt: str) -> tuple[tuple[str, ...], bytes | None]:
    """(argv, stdin bytes or None) for `prompt` under the contract."""
    data = prompt.encode("utf-8", errors="replace")
    if len(data) > STDIN_THRESHOLD or "\x00" in prompt:
        return tuple(command), data
    return (*command, data.decode("utf-8")), None


def run_headless(
    command: Sequence[str],
    prompt: str,
    *,
    env: Mapping[str, str],
    cwd: Path | str,
    timeout: float,
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run `command` on `prompt` in `cwd` with exactly `env`, for at most `timeout` seconds.

    Setting `cancel` ends the run within about _POLL_S: the model's process group gets SIGTERM, TERM_GRACE_S, then
    SIGKILL, and the result has interrupted=True and error INTERRUPTED."""
    argv, stdin_data = build_argv(command, prompt)
    started = time.monotonic()
    if cancel is not None and cancel.is_set():
        return RunResult(False, "", "", None, False, 0.0, INTERRUPTED, interrupted=True)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=str(cwd),
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, ValueError) as exc:
        text = getattr(exc, "strerror", None) or str(exc)
        return RunResult(False, "", "", None, False, time.monotonic() - started, f"cannot run {argv[0]}: {text}")
    deadline = started + timeout
    try:
        out, err, out_dropped, ended = _pump(proc, stdin_data, deadline, cancel)
        if ended is None:
            # Both pipes closed; a model that closed them early still gets only the rest of its time.
            ended = _wait_exit(proc, deadline, cancel)
            if ended is not None:
                _kill_group(proc)
    finally:
        _reap(proc)
    duration = time.monotonic() - started
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    code = proc.returncode
    if ended == "cancel":
        return RunResult(
            False, stdout, stderr, code, False, duration, INTERRUPTED, interrupted=True, stdout_dropped=out_dropped
        )
    if ended == "timeout":
        error = f"timed out after {timeout:g}s"
        return RunResult(False, stdout, stderr, code, True, duration, error, stdout_dropped=out_dropped)
    if code == 0:
        return RunResult(True, stdout, stderr, 0, False, duration, None, stdout_dropped=out_dropped)
    error = _exit_error(code, stdout, stderr)
    return RunResult(False, stdout, stderr, code, False, duration, error, stdout_dropped=out_dropped)


def _wait_exit(proc: subprocess.Popen[bytes], deadline: float, cancel: threading.Event | None) -> str | None:
    """Wait for the model to exit until the deadline, watching `cancel`; None, "timeout" or "cancel"."""
    while True:
        try:
            proc.wait(timeout=max(0.0, min(_POLL_S, deadline - time.monotonic())))
            return None
        except subprocess.TimeoutExpired:
            pass
        if cancel is not None and cancel.is_set():
            return "cancel"
        if time.monotonic() >= deadline:
            return "timeout"


def _pump(
    proc: subprocess.Popen[bytes], stdin_data: bytes | None, deadline: float, cancel: threading.Event | None = None
) -> tuple[bytes, bytes, int, str | None]:
    """Feed stdin and read stdout/stderr until both close, the deadline passes or `cancel` is set (group killed),
    or the model has exited and leftovers hold the pipes. Returns (stdout, stderr, stdout bytes dropped, why the
    run was ended: None, "timeout" or "cancel")."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    dropped = 0
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    pending = memoryview(stdin_data or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
    ended: str | None = None
    exited_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline or (cancel is not None and cancel.is_set()):
                ended = "timeout" if now >= deadline else "cancel"
                _kill_group(proc)
                break
            if exited_at is None and _exited(proc):
                exited_at = now
            elif exited_at is not None and now - exited_at > EXIT_DRAIN_S:
                break
            events = sel.select(min(_POLL_S, deadline - now))
            for key, _ in events:
                if key.data == "in":
                    pending = _feed(sel, proc, pending)
                    continue
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.data == "out":
                    room = STDOUT_CAP - len(out)
                    out += chunk[:room]
                    dropped += max(0, len(chunk) - room)
                else:
                    err += chunk
                    if len(err) > STDERR_CAP:
                        del err[: len(err) - STDERR_CAP]
        if sel.get_map():
            # Ended, or the model exited while something it started still holds the pipes: end the group,
            # then take what is already buffered (bounded; the pipes close once the group is gone).
            _signal_group(proc, signal.SIGKILL)
            _drain(sel, out, err, time.monotonic() + 1.0)
    finally:
        sel.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    return bytes(out), bytes(err), dropped, ended


def _feed(sel: selectors.BaseSelector, proc: subprocess.Popen[bytes], pending: memoryview) -> memoryview:
    """Write what the pipe takes now; close stdin when done or when the model stopped reading it."""
    assert proc.stdin is not None
    try:
        written = os.write(proc.stdin.fileno(), pending[:_READ_CHUNK])
        pending = pending[written:]
    except BlockingIOError:
        return pending
    except (BrokenPipeError, OSError):
        pending = pending[:0]  # the model closed stdin; what it did read is its business
    if not pending:
        sel.unregister(proc.stdin)
        with contextlib.suppress(OSError):
            proc.stdin.close()
    return pending


def _drain(sel: selectors.BaseSelector, out: bytearray, err: bytearray, deadline: float) -> None:
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
            if key.data == "in":
                sel.unregister(key.fileobj)
                continue
            try:
                chunk = os.read(key.fd, _READ_CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                sel.unregister(key.fileobj)
            elif key.data == "out":
                out += chunk[: max(0, STDOUT_CAP - len(out))]
            else:
                err += chunk


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the model process has exited, without reaping it (so its pid, the group id, stays reserved)."""
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the model's process group, give it TERM_GRACE_S to leave, then SIGKILL whatever is left."""
    _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    while not _exited(proc) and time.monotonic() < deadline:
        time.sleep(0.02)
    _signal_group(proc, signal.SIGKILL)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        # Only reachable if the model ignored a closed stdout and survived; the group kill cannot be ignored.
        _signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=5.0)


def _exit_error(code: int, stdout: str, stderr: str) -> str:
    """One line: how the model ended and the last lines it wrote (stderr first, else stdout)."""
    if code < 0:
        try:
            head = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            head = f"killed by signal {-code}"
    else:
        head = f"exit {code}"
    # Both streams: CLIs differ in where the cause goes (claude prints it on stdout and only warnings on stderr).
    err, out = _tail_lines(stderr), _tail_lines(stdout)
    if err and out:
        return f"{head}: {err} (stdout: {out})"
    tail = err or out
    return f"{head}: {tail}" if tail else f"{head} (no output)"


def _tail_lines(text: str, count: int = 3, limit: int = 500) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " | ".join(lines[-count:])
    return joined if len(joined) <= limit else "…" + joined[-(limit - 1) :]
