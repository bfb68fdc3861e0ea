"""The dispatcher: one tick (sync, scan the commits since the cursor, run the pending batches, commit the replies,
move the cursor). The loop around it (lock, wake socket, interval) is crosstalk.bus.dispatch.daemon; running the
batches and committing their replies is crosstalk.bus.dispatch.batches, one model run over one batch
crosstalk.bus.runs.invoke.

Model runs are at-least-once, replies one per message: the cursor only moves after every batch of the tick has its
reply committed, and the scan skips messages whose reply is already in the range. A crash between a model run and
its commit runs the model again after the restart; what the killed run left uncommitted is moved aside at boot
(store.move_orphans), so its reply never reaches the history. A stop interrupts running models; their batches get
no reply and run again after a restart.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crosstalk.bus.dispatch import daemon
from crosstalk.bus.dispatch.batches import BatchRunner
from crosstalk.bus.dispatch.eventlog import EventLog
from crosstalk.bus.dispatch.relay import LiveRelay
from crosstalk.bus.dispatch.remote import RemoteWake
from crosstalk.bus.dispatch.tickreport import TickReport
from crosstalk.bus.errors import BusError, GitError, ModelError
from crosstalk.bus.git.locks import transport_lock
from crosstalk.bus.live.held import HeldMessages
from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.message import utc_timestamp
from crosstalk.bus.protocol.models import CONFIG_PATH, ModelSpec, Skipped, claim, load_registry
from crosstalk.bus.runs.claimers import STATE_FILE as CLAIMERS_FILE
from crosstalk.bus.runs.scan import scan
from crosstalk.bus.transport.state import read_cursor, write_cursor, write_json_atomic
from crosstalk.bus.transport.store import move_orphans
from crosstalk.bus.transport.transports import Transport
from crosstalk.bus.workflow.engine import WorkflowEngine
from crosstalk.registry.paths import StatePaths

ACTIVE_INTERVAL_S = 0.5  # between ticks while a conversation is active
ACTIVE_FOR_S = 120.0  # how long after the last traffic it counts as active


class Dispatcher:
    """One transport's dispatcher on this machine. `tick()` is safe to call directly (tests, `--once`).

    It ticks every `active_interval` seconds for `active_for` seconds after traffic (new commits, or a local
    `message send` waking it), then every `interval`. A tick whose remote branch has not moved (one ref listing)
    and that has nothing to push does no fetch."""

    def __init__(
        self,
        transport: Transport,
        *,
        jobs: int = 4,
        interval: float = 5.0,
        active_interval: float = ACTIVE_INTERVAL_S,
        active_for: float = ACTIVE_FOR_S,
        model_timeout: float | None = None,
        log: EventLog | None = None,
        environ: Mapping[str, str] | None = None,
        remote_wake: RemoteWake | None = None,
    ) -> None:
        self.transport = transport
        self.root = Path(transport.root)
        self.alias = transport.alias
        self.jobs = max(1, jobs)
        self.interval = interval
        self.active_interval = min(active_interval, interval)
        self.active_for = active_for
        self.remote_wake = remote_wake  # the other machines' wakes (a relay), or None: the poll alone
        self._pushed_elsewhere = False  # a wake said the remote moved: the next tick fetches without asking first
        self._active_until = float("-inf")  # monotonic
        self.model_timeout = model_timeout
        self.environ = dict(os.environ if environ is None else environ)
        self.repo = transport.git()
        self.state = transport.state(self.environ).ensure()
        self.paths = StatePaths.from_env(self.environ)  # live agents on this machine (the bridge)
        self.log = log or EventLog(self.state.log)
        self.relay = LiveRelay(transport, self.paths, HeldMessages(self.state.held), self.log)
        self.claimed: list[ModelSpec] = []
        self.skipped: list[Skipped] = []
        self.halted: str | None = None
        self.started_at = utc_timestamp()
        self.last_tick_at: str | None = None
        self.counts = {"ticks": 0, "errors": 0, "dispatched": 0, "silent": 0, "failed": 0}
        self._count_lock = threading.Lock()
        self._registry_sig: tuple[int, int, int] | None = None
        self._registry_loaded = False
        self._stop = threading.Event()
        self.batches = BatchRunner(
            transport, self.repo, environ=self.environ, model_timeout=model_timeout, cancel=self._stop, log=self.log,
            error=self._error, sync=self._sync, counts=self.counts, count_lock=self._count_lock,
        )  # fmt: skip
        self.workflows = WorkflowEngine(
            transport, self.state.dir / CLAIMERS_FILE, claimed=lambda: self.claimed, environ=self.environ,
            log=self.log, error=self._error, cancel=self._stop, model_timeout=model_timeout,
        )  # fmt: skip
        self._ticked = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    # ------------------------------------------------------------------------------------------------ registry

    def reload_registry(self, *, force: bool = False) -> bool:
        """(Re)load data/crosstalk.yaml and re-claim models by PATH when the file changed; whether it reloaded."""
        try:
            st = os.stat(self.root / CONFIG_PATH)
            sig: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            sig = None
        if self._registry_loaded and not force and sig == self._registry_sig:
            return False
        self._registry_sig, self._registry_loaded = sig, True
        try:
            self.claimed, self.skipped = claim(load_registry(self.root), self.environ.get("PATH"))
        except ModelError as exc:
            self.claimed, self.skipped = [], [Skipped(CONFIG_PATH, exc.message)]
            self._error("registry_error", error=exc.message)
        self.log(
            "registry_reload",
            claimed=",".join(s.key for s in self.claimed) or "-",
            skipped="; ".join(f"{s.what}: {s.reason}" for s in self.skipped) or "-",
        )
        return True

    def recover(self) -> None:
        """At boot: move aside what a writer killed mid-publish left uncommitted under data/channels."""
        try:
            with transport_lock(self.root):
                moved = move_orphans(self.transport)
        except BusError as exc:
            self._error("recover_failed", error=exc.message)
            return
        for rel in moved:
            self.log("orphan_moved", "warn", path=rel, to=str(self.state.orphans))

    # ------------------------------------------------------------------------------------------------ the tick

    def tick(self) -> TickReport:
        """One pass: sync, scan (cursor, HEAD], run every pending batch, commit replies, move the cursor."""
        started = time.monotonic()
        report = TickReport()
        self._bump("ticks")
        self.batches.new_tick()
        cursor = read_cursor(self.state)
        self.relay.release(report, self.batches.reject)  # every tick: a held message's agent may be back
        if not self._ticked:  # a restart: resume the workflows the last life left open
            self._ticked = True
            self.workflows.advance_all()
        with transport_lock(self.root):
            self._sync()
            if not self._version_ok():
                report.halted = self.halted
                self._finish(report, started)
                return report
            self.reload_registry()
            head = self.repo.head()
            report.head = head
            if head == cursor:
                self._finish(report, started)
                return report
            scan_range = functools.partial(
                scan,
                self.repo,
                self.root,
                claimed=self.claimed,
                alias=self.alias,
                live_agent=self.relay.live_agent,
                known_agent=self.relay.known_agent,
            )
            try:
                result = scan_range(cursor, head)
            except GitError:
                # The cursor's commit is gone (a re-clone, a gc after a history rewrite): rescan the whole tree;
                # the answered index keeps already answered messages from running again.
                result = scan_range(None, head)
        report.idle = False
        self.note_activity()
        self.workflows.learn(result.messages)
        report.added, report.parse_errors = result.added, len(result.parse_errors)
        report.skipped_answered, report.batches = result.skipped_answered, len(result.batches)
        for bad in result.parse_errors:
            self._error("parse_error", path=bad.path, error=bad.error)
        for path in result.ignored:
            self.log("ignored", "warn", path=path, reason="not inside a channel directory (data/channels/<uuid>/)")
        if result.live or result.down:
            self.relay.route(result.live, result.down, report, self.batches.reject)
        if result.rejections and not self.batches.reject(result.rejections, report):
            report.incomplete += 1
        if result.batches:
            with ThreadPoolExecutor(max_workers=min(self.jobs, len(result.batches))) as pool:
                for done in list(pool.map(lambda b: self.batches.run(b, head, report), result.batches)):
                    if not done:
                        report.incomplete += 1
        self.workflows.advance_all()  # the steps the new commits allow (each one commit; resumable)
        if report.incomplete == 0:
            write_cursor(self.state, head)
        self._finish(report, started)
        return report

    def _sync(self) -> None:
        """Pull what the remote has and push what only we have (a reply whose push failed in an earlier tick).
        When the remote's branch is where our last fetch left it and nothing waits to be pushed, nothing is
        fetched: an idle tick costs one ref listing. A tick another machine's wake asked for (pushed_elsewhere)
        fetches without asking first."""
        told, self._pushed_elsewhere = self._pushed_elsewhere, False
        try:
            if not self.repo.has_remote():
                return
            if not told and self.repo.ahead_behind() == (0, 0) and self.repo.remote_head() == self.repo.remote_branch():
                return  # in step with the remote as our last fetch saw it, and the remote has not moved since
            self.repo.sync(remote_checked=True)
            if self.repo.ahead_behind()[0] > 0:
                if not self.repo.push_with_retry():
                    self._error("push_failed", error=self.repo.last_push_error or "the remote is unreachable")
                elif self.remote_wake is not None:
                    self.remote_wake.announce()
        except GitError as exc:
            self._error("sync_failed", error=exc.message)

    def _version_ok(self) -> bool:
        """A transport upgraded under us stops dispatching (and the heartbeat says why) until it is v7 again."""
        try:
            layout.check_version(self.root, self.transport.name)
        except BusError as exc:
            if self.halted != exc.message:
                self._error("version_error", error=exc.message)
            self.halted = exc.message
            return False
        if self.halted is not None:
            self.log("version_ok", protocol=layout.PROTOCOL_VERSION)
        self.halted = None
        return True

    def _finish(self, report: TickReport, started: float) -> None:
        report.duration_s = time.monotonic() - started
        self.last_tick_at = utc_timestamp()
        if report.eventful:  # scanning our own reply commits is not news
            self.log("tick", "info", **report.log_fields())
        self.write_heartbeat()

    # ------------------------------------------------------------------------------------------------ state

    def _bump(self, key: str, by: int = 1) -> None:
        with self._count_lock:
            self.counts[key] += by

    def _error(self, event: str, **fields: object) -> None:
        self._bump("errors")
        self.log(event, "error", **fields)

    record_error = _error  # for the loop (crosstalk.bus.dispatch.daemon): counted in the heartbeat's errors, logged

    def heartbeat(self, *, running: bool = True) -> dict[str, object]:
        return {
            "pid": os.getpid(),
            "transport": self.transport.name,
            "root": str(self.root),
            "alias": self.alias,
            "started_at": self.started_at,
            "last_tick_at": self.last_tick_at,
            "interval": self.interval,
            "active_interval": self.active_interval,
            "polling": self.next_wait(),
            "jobs": self.jobs,
            "cursor": read_cursor(self.state),
            "claimed": [s.key for s in self.claimed],
            "skipped": [{"what": s.what, "reason": s.reason} for s in self.skipped],
            "halted": self.halted,
            "held": len(self.relay.held),
            "running": running,
            **self.counts,
        }

    def write_heartbeat(self, *, running: bool = True) -> None:
        write_json_atomic(self.state.heartbeat, self.heartbeat(running=running))

    # ------------------------------------------------------------------------------------------------ the loop

    def pushed_elsewhere(self) -> None:
        """Another machine of the transport said it pushed (a relay wake): the next tick fetches at once."""
        self._pushed_elsewhere = True

    def note_activity(self) -> None:
        """Traffic seen or sent: tick every active_interval for the next active_for seconds."""
        self._active_until = time.monotonic() + self.active_for

    def next_wait(self) -> float:
        """Seconds until the next tick when nothing wakes the loop."""
        return self.active_interval if time.monotonic() < self._active_until else self.interval

    def stop(self) -> None:
        """Ask the loop to end (safe from a signal handler): batches not started yet are left for the next run,
        running models are interrupted (their group killed, no reply written), and the git work of the current
        tick finishes."""
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def wake_fd(self) -> int:
        """Readable once stop() was called (the loop waits on it next to wake.sock)."""
        return self._wake_r

    def run_forever(self, stop_event: threading.Event | None = None, *, once: bool = False) -> int:
        """Hold dispatcher.lock, write the pid file, bind wake.sock, then tick and wait until stopped (see
        crosstalk.bus.dispatch.daemon.run_loop)."""
        return daemon.run_loop(self, stop_event, once=once)
