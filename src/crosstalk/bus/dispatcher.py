"""The dispatcher: one tick (sync, scan the commits since the cursor, run the pending batches, commit the replies,
move the cursor). The loop around it (lock, wake socket, interval) is crosstalk.bus.daemon; one model run over one
batch is crosstalk.bus.invoke.

Model runs are at-least-once, replies one per message: the cursor only moves after every batch of the tick has its
reply committed, and the scan skips messages whose reply is already in the range. A crash between a model run and
its commit runs the model again after the restart; what the killed run left uncommitted is moved aside at boot
(store.move_orphans), so its reply never reaches the history. A stop interrupts running models; their batches get
no reply and run again after a restart.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crosstalk.bus import daemon, layout
from crosstalk.bus.claimers import STATE_FILE as CLAIMERS_FILE
from crosstalk.bus.errors import BusError, GitError, Interrupted, ModelError
from crosstalk.bus.eventlog import EventLog
from crosstalk.bus.gitops import transport_lock
from crosstalk.bus.held import HeldMessages
from crosstalk.bus.invoke import invoke_batch
from crosstalk.bus.message import MAX_BODY_BYTES, fit_body, too_large, utc_timestamp
from crosstalk.bus.models import CONFIG_PATH, ModelSpec, Skipped, claim, load_registry
from crosstalk.bus.relay import LiveRelay
from crosstalk.bus.replies import batch_replies, failed_replies
from crosstalk.bus.scan import Batch, Rejection, is_answered, replies_since, scan
from crosstalk.bus.state import read_cursor, write_cursor, write_json_atomic
from crosstalk.bus.store import move_orphans, publish
from crosstalk.bus.tickreport import TickReport
from crosstalk.bus.transports import Transport
from crosstalk.bus.workflow.engine import WorkflowEngine
from crosstalk.registry.paths import StatePaths

ACTIVE_INTERVAL_S = 0.5  # between ticks while a conversation is active
ACTIVE_FOR_S = 120.0  # how long after the last traffic it counts as active
ERROR_CHARS = 2000  # a failed reply's error (front matter and first line): one line, from a model or our own


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
    ) -> None:
        self.transport = transport
        self.root = Path(transport.root)
        self.alias = transport.alias
        self.jobs = max(1, jobs)
        self.interval = interval
        self.active_interval = min(active_interval, interval)
        self.active_for = active_for
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
        # Replies a model gave whose commit failed (batch key -> files, summary): the next tick commits them
        # instead of running the model again. Only the last tick's are kept (a batch that changed runs again).
        self._unpublished: dict[tuple[str, ...], tuple[dict[str, str], str]] = {}
        self._retained: dict[tuple[str, ...], tuple[dict[str, str], str]] = {}
        self._registry_loaded = False
        self._stop = threading.Event()
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
        self._retained, self._unpublished = self._unpublished, {}
        cursor = read_cursor(self.state)
        self.relay.release(report, self._reject)  # every tick: a held message's agent may be back
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
            found = {
                "claimed": self.claimed,
                "alias": self.alias,
                "live_agent": self.relay.live_agent,
                "known_agent": self.relay.known_agent,
            }
            try:
                result = scan(self.repo, self.root, cursor, head, **found)
            except GitError:
                # The cursor's commit is gone (a re-clone, a gc after a history rewrite): rescan the whole tree;
                # the answered index keeps already answered messages from running again.
                result = scan(self.repo, self.root, None, head, **found)
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
            self.relay.route(result.live, result.down, report, self._reject)
        if result.rejections and not self._reject(result.rejections, report):
            report.incomplete += 1
        if result.batches:
            with ThreadPoolExecutor(max_workers=min(self.jobs, len(result.batches))) as pool:
                for done in list(pool.map(lambda b: self._run_batch(b, head, report), result.batches)):
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
        fetched: an idle tick costs one ref listing."""
        try:
            if not self.repo.has_remote():
                return
            if self.repo.ahead_behind() == (0, 0) and self.repo.remote_head() == self.repo.remote_branch():
                return  # in step with the remote as our last fetch saw it, and the remote has not moved since
            self.repo.sync(remote_checked=True)
            if self.repo.ahead_behind()[0] > 0 and not self.repo.push_with_retry():
                self._error("push_failed", error=self.repo.last_push_error or "the remote is unreachable")
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
            self.log("tick", **report.log_fields())
        self.write_heartbeat()

    # ------------------------------------------------------------------------------------------------ batches

    def _run_batch(self, batch: Batch, head: str, report: TickReport) -> bool:
        """Run one batch and commit its replies; False when it must run again next tick. Anything but a git error
        or a stop (which a later tick retries) settles this batch with a failed reply naming it, and the tick goes
        on with the others."""
        try:
            return self._dispatch(batch, head, report)
        except Exception as exc:  # hostile content or a bug: this batch fails, never the tick
            reason = f"crosstalk could not dispatch it ({type(exc).__name__}: {exc})"
            self._error("dispatch_error", channel=batch.channel, model=batch.model.key, error=reason)
            try:
                return self._fail_batch(batch, reason, "", report)
            except Exception as again:
                self._error("dispatch_error", channel=batch.channel, error=f"cannot record the failure: {again}")
                return False

    def _dispatch(self, batch: Batch, head: str, report: TickReport) -> bool:
        if self._stop.is_set():
            return False
        try:
            if batch.bare and not self._drop_taken(batch, head, report):
                return True
            key = _batch_key(batch)
            with self._count_lock:
                retained = self._retained.pop(key, None)
            if retained is not None:  # the model answered last tick; only the commit failed
                self.log("reply_retried", channel=batch.channel, model=batch.model.key, n=len(batch.messages))
                return self._commit(*retained, report, key=key)
            result, error = self._invoke(batch)
        except Interrupted:
            return False  # no reply: the batch runs again after a restart (the cursor stays put)
        except BusError as exc:
            self._error("dispatch_error", channel=batch.channel, model=batch.model.key, error=exc.message)
            return False
        with self._count_lock:
            report.dispatched += len(batch.messages)
            self.counts["dispatched"] += len(batch.messages)
        # What a reply may hold, with room for the error line in front of a failed one (bounded here too).
        answer, cut = fit_body(result.strip(), MAX_BODY_BYTES - ERROR_CHARS * 4 - 2)
        if cut:
            error = error or too_large(cut)
        if error is None and answer:
            return self._reply(batch, answer, report, failed=None)
        if error is None:
            self.log("dispatch_silent", channel=batch.channel, model=batch.model.key, n=len(batch.messages))
            with self._count_lock:
                report.silent += 1
                self.counts["silent"] += 1
            return True
        return self._fail_batch(batch, error, answer, report)

    def _fail_batch(self, batch: Batch, error: str, answer: str, report: TickReport) -> bool:
        """A failed reply to every message of the batch: the error (one line, bounded), then what the model said."""
        error = " ".join(error.split())[:ERROR_CHARS] or "failed"
        self.log("dispatch_failed", "warn", channel=batch.channel, model=batch.model.key, error=error)
        with self._count_lock:
            report.failed += 1
            self.counts["failed"] += 1
        return self._reply(batch, error + (f"\n\n{answer}" if answer else ""), report, failed=error)

    def _drop_taken(self, batch: Batch, head: str, report: TickReport) -> bool:
        """Bare-name work may be taken by any dispatcher claiming the model: sync first and drop what another
        one already answered since the tick began. False when nothing is left to run."""
        if not self.repo.has_remote():
            return True
        with transport_lock(self.root):
            self._sync()
            now = self.repo.head()
            answered = replies_since(self.repo, self.root, head, now) if now != head else {}
        if not answered:
            return True
        keep = [m for m in batch.messages if not is_answered(answered, m.channel, m.rel, batch.model.key)]
        with self._count_lock:
            report.skipped_taken += len(batch.messages) - len(keep)
        batch.messages[:] = keep
        return bool(keep)

    def _invoke(self, batch: Batch) -> tuple[str, str | None]:
        return invoke_batch(
            batch,
            root=self.root,
            alias=self.alias,
            environ=self.environ,
            model_timeout=self.model_timeout,
            cancel=self._stop,
            log=self.log,
            error=self._error,
        )

    def _reply(self, batch: Batch, body: str, report: TickReport, *, failed: str | None) -> bool:
        """One reply per distinct asker, re: that asker's messages; all in one commit."""
        files = batch_replies(batch, self.alias, body, failed=failed)
        sender = f"{batch.model.key}@{self.alias}"
        summary = f"crosstalk: {'failed ' if failed else ''}reply from {sender} ({len(batch.messages)} message(s))"
        return self._commit(files, summary, report, key=_batch_key(batch))

    def _reject(self, rejections: list[Rejection], report: TickReport) -> bool:
        """Failed replies for messages no model can take (an ambiguous bare name, an unreadable file)."""
        for item in rejections:
            self.log("dispatch_failed", "warn", channel=item.channel, model=item.addressee, error=item.error)
        files = failed_replies(rejections, self.alias)
        report.rejected += len(rejections)
        with self._count_lock:
            self.counts["failed"] += len(rejections)
        return self._commit(files, f"crosstalk: {len(files)} failed reply(ies) from {self.alias}", report)

    def _commit(
        self, files: dict[str, str], summary: str, report: TickReport, *, key: tuple[str, ...] | None = None
    ) -> bool:
        try:
            result = publish(self.transport, files, summary)
        except BusError as exc:
            self._error("commit_failed", error=exc.message)
            if key is not None:
                with self._count_lock:
                    self._unpublished[key] = (files, summary)
            return False
        with self._count_lock:
            report.replies += len(files)
            report.reply_paths.extend(files)
        for path in files:
            self.log("reply", path=path)
        if result.push_error:
            self._error("push_failed", error=result.push_error)
        return True

    # ------------------------------------------------------------------------------------------------ state

    def _bump(self, key: str, by: int = 1) -> None:
        with self._count_lock:
            self.counts[key] += by

    def _error(self, event: str, **fields: object) -> None:
        self._bump("errors")
        self.log(event, "error", **fields)

    record_error = _error  # for the loop (crosstalk.bus.daemon): counted in the heartbeat's errors, logged

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
        crosstalk.bus.daemon.run_loop)."""
        return daemon.run_loop(self, stop_event, once=once)


def _batch_key(batch: Batch) -> tuple[str, ...]:
    """One batch's identity across ticks: its channel, model, persona and messages."""
    return (batch.channel, batch.model.key, batch.as_ or "", *(m.rel for m in batch.messages))
