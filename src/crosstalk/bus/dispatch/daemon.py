"""The dispatcher daemon's loop and the pieces it holds for its life: dispatcher.lock with the pid file, and the
wake socket. `crosstalk daemon dispatch` (what `server start` and systemd run) calls Dispatcher.run_forever,
which is run_loop here; the tick itself lives in crosstalk.bus.dispatch.dispatcher.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
from collections.abc import Sized
from typing import TYPE_CHECKING, Protocol

from crosstalk.bus.dispatch.remote import RemoteWake, WakeGate
from crosstalk.bus.errors import AlreadyRunning
from crosstalk.bus.transport.state import PUSHED_BYTE, TransportState, read_pid, write_text_atomic
from crosstalk.fs.locks import FileLock

if TYPE_CHECKING:
    from crosstalk.bus.dispatch.eventlog import EventLog
    from crosstalk.bus.transport.transports import Transport

_STOP_POLL_S = 0.5
FOLLOW_S = 1.0  # how often a waiting loop looks whether the machine joined or left a relay (one stat)


class Loopable(Protocol):
    """What run_loop needs of the dispatcher (crosstalk.bus.dispatch.dispatcher.Dispatcher), so this module does not
    import the dispatcher that imports it."""

    @property
    def state(self) -> TransportState: ...
    @property
    def transport(self) -> Transport: ...
    @property
    def alias(self) -> str: ...
    @property
    def interval(self) -> float: ...
    @property
    def jobs(self) -> int: ...
    @property
    def claimed(self) -> Sized: ...
    @property
    def log(self) -> EventLog: ...
    @property
    def stopping(self) -> bool: ...
    def next_wait(self) -> float: ...
    def note_activity(self) -> None: ...
    def pushed_elsewhere(self) -> None: ...
    @property
    def wake_fd(self) -> int: ...
    @property
    def remote_wake(self) -> RemoteWake | None: ...

    def stop(self) -> None: ...
    def tick(self) -> object: ...
    def reload_registry(self, *, force: bool = False) -> bool: ...
    def recover(self) -> None: ...
    def record_error(self, event: str, **fields: object) -> None: ...
    def write_heartbeat(self, *, running: bool = True) -> None: ...


def hold_dispatcher_lock(state: TransportState, name: str) -> FileLock:
    """Take dispatcher.lock for the daemon's life (release() gives it up) and write the pid file."""
    lock = FileLock(state.lock)
    if not lock.try_acquire():
        pid = read_pid(state)
        raise AlreadyRunning(f"a dispatcher for transport {name} is already running (pid {pid or 'unknown'})")
    write_text_atomic(state.pidfile, f"{os.getpid()}\n", mode=0o644)
    return lock


def bind_wake_socket(state: TransportState) -> socket.socket:
    """Bind wake.sock (AF_UNIX datagrams, 0600) non-blocking; the caller holds dispatcher.lock."""
    path = state.wake_sock
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead dispatcher's leftover; we hold the lock, so no live one owns it
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    old = os.umask(0o177)
    try:
        sock.bind(os.fsencode(path))
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.setblocking(False)
    return sock


def drain(sock: socket.socket) -> bool:
    """Consume pending wake datagrams: the tick about to run covers everything sent before it. Whether one came from
    a writer that pushed (PUSHED_BYTE)."""
    pushed = False
    for _ in range(100000):
        try:
            pushed = sock.recv(64) == PUSHED_BYTE or pushed
        except (BlockingIOError, InterruptedError):
            break
    return pushed


def _wait(watched: list[socket.socket | int], timeout: float) -> list[socket.socket | int]:
    ready: list[socket.socket | int] = []
    with contextlib.suppress(InterruptedError):
        ready, _, _ = select.select(watched, [], [], timeout)
    return ready


def _wait_following(
    local: list[socket.socket | int], remote: RemoteWake | None, timeout: float
) -> tuple[list[socket.socket | int], list[socket.socket | int]]:
    """Wait `timeout` for a local poke or stop, or the remote wake; every FOLLOW_S of it, `remote.refresh()`
    follows a `relay join` or `leave` (one stat), so the wake connects or disconnects without a restart and without
    an extra tick: the poll's rate is unchanged. Returns what is ready and the remote descriptor it watched."""
    end = time.monotonic() + timeout
    while True:
        remote_fd: list[socket.socket | int] = []
        if remote is not None:
            remote.refresh()
            remote_fd = [remote.fileno()]
        left = end - time.monotonic()
        ready = _wait(local + remote_fd, max(0.0, min(left, FOLLOW_S) if remote is not None else left))
        if ready or left <= FOLLOW_S or remote is None:
            return ready, remote_fd


def _forward_stop(dispatcher: Loopable, event: threading.Event) -> None:
    """An external stop event interrupts the wait (and running models) as stop() does; polled, so this thread
    never outlives the loop by more than _STOP_POLL_S."""
    while not dispatcher.stopping:
        if event.wait(_STOP_POLL_S):
            dispatcher.stop()
            return


def run_loop(dispatcher: Loopable, stop_event: threading.Event | None = None, *, once: bool = False) -> int:
    """Hold dispatcher.lock, write the pid file, bind wake.sock, then tick and wait until stopped.

    On the way out it removes only what this run made and nobody else may use: wake.sock (it bound it) and the pid
    file while it still names this process; the lock file, cursor, heartbeat (marked running=false) and log stay.
    The `stop` line is logged however the loop ends."""
    state = dispatcher.state
    lock = hold_dispatcher_lock(state, dispatcher.transport.name)  # AlreadyRunning: nothing here to clean up
    sock: socket.socket | None = None
    reason = "error"
    try:
        if stop_event is not None:
            threading.Thread(target=_forward_stop, args=(dispatcher, stop_event), daemon=True).start()
        sock = bind_wake_socket(state)
        dispatcher.recover()
        dispatcher.reload_registry(force=True)
        dispatcher.log(
            "boot",
            pid=os.getpid(),
            transport=dispatcher.transport.name,
            alias=dispatcher.alias,
            interval=dispatcher.interval,
            jobs=dispatcher.jobs,
            claimed=len(dispatcher.claimed),
        )
        dispatcher.write_heartbeat()
        remote, gate = dispatcher.remote_wake, WakeGate()
        while not dispatcher.stopping:
            if drain(sock) and remote is not None:
                remote.announce()  # a local writer pushed: the other machines fetch now, not at their next poll
            try:
                dispatcher.tick()
            except Exception as exc:  # one bad tick must not end the daemon; the next one retries
                dispatcher.record_error("tick_failed", error=f"{type(exc).__name__}: {exc}")
                with contextlib.suppress(OSError):
                    dispatcher.write_heartbeat()
            if once or dispatcher.stopping:
                break
            local: list[socket.socket | int] = [sock, dispatcher.wake_fd]
            ready, remote_fd = _wait_following(local, remote, dispatcher.next_wait())
            if sock in ready:  # a local `message send`: a conversation is under way
                dispatcher.note_activity()
            elif remote is not None and remote_fd[0] in ready and (heard := remote.take()):
                # Another machine pushed: the next tick fetches without asking first. The gate bounds the ticks
                # (fetches) that wakes can cause, however many arrive; a local poke or a stop ends the wait at once.
                delay = gate.delay(time.monotonic())
                if delay > 0 and sock in _wait(local, delay):
                    dispatcher.note_activity()
                dispatcher.pushed_elsewhere()
                dispatcher.log("relay_wake", machines=",".join(heard), gated=f"{delay:.3f}")
        reason = "once" if once and not dispatcher.stopping else "stopped"
        return 0
    finally:
        dispatcher.stop()  # ends a _forward_stop watcher (and is harmless when already stopping)
        with contextlib.suppress(OSError):
            dispatcher.write_heartbeat(running=False)
        if sock is not None:
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                state.wake_sock.unlink()
        if read_pid(state) == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                state.pidfile.unlink()
        with contextlib.suppress(Exception):  # the log must not mask why the loop ended
            dispatcher.log("stop", pid=os.getpid(), reason=reason)
        lock.release()
