"""One tick's batches from pending to settled: a bare-name batch another dispatcher answered meanwhile is dropped,
the model runs (crosstalk.bus.runs.invoke), and its answer, its silence or its failure is committed as replies.

A reply whose commit failed is kept for the next tick, which commits it instead of running the model again, also
when more messages joined the batch since (the model then runs for those alone); only the last tick's are kept, and
a batch that lost some of its messages runs again. Anything but a git error or a stop settles a batch
with a failed reply naming it, and the tick goes on with the others.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from crosstalk.bus.dispatch.eventlog import EventLog
from crosstalk.bus.dispatch.tickreport import TickReport
from crosstalk.bus.errors import BusError, Interrupted
from crosstalk.bus.git.locks import transport_lock
from crosstalk.bus.git.repo import GitRepo
from crosstalk.bus.protocol.message import MAX_BODY_BYTES, fit_body, too_large
from crosstalk.bus.runs.invoke import invoke_batch
from crosstalk.bus.runs.reader import is_answered, replies_since
from crosstalk.bus.runs.replies import batch_replies, failed_replies
from crosstalk.bus.runs.scan import Batch, Rejection
from crosstalk.bus.transport.store import publish
from crosstalk.bus.transport.transports import Transport

ERROR_CHARS = 2000  # a failed reply's error (front matter and first line): one line, from a model or our own

Replies = dict[tuple[str, ...], tuple[dict[str, str], str]]  # batch key -> (reply files, commit summary)


class BatchRunner:
    """Runs a dispatcher's batches and commits their replies; `counts` (under `count_lock`) are the dispatcher's
    heartbeat counters, `error` its counted error log, `sync` its pull-and-push (called under the transport lock)."""

    def __init__(
        self,
        transport: Transport,
        repo: GitRepo,
        *,
        environ: Mapping[str, str],
        model_timeout: float | None,
        cancel: threading.Event,
        log: EventLog,
        error: Callable[..., None],
        sync: Callable[[], None],
        counts: dict[str, int],
        count_lock: threading.Lock,
    ) -> None:
        self.transport = transport
        self.root = Path(transport.root)
        self.alias = transport.alias
        self.repo = repo
        self.environ = environ
        self.model_timeout = model_timeout
        self._cancel = cancel
        self._log = log
        self._error = error
        self._sync = sync
        self._counts = counts
        self._count_lock = count_lock
        self._unpublished: Replies = {}
        self._retained: Replies = {}

    def new_tick(self) -> None:
        """The replies the last tick could not commit are the ones this tick retries; older ones are dropped."""
        self._retained, self._unpublished = self._unpublished, {}

    def run(self, batch: Batch, head: str, report: TickReport) -> bool:
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
        if self._cancel.is_set():
            return False
        try:
            if batch.bare and not self.drop_taken(batch, head, report):
                return True
            for rkey, (files, summary) in self._take_retained(batch):
                # The model answered these last tick; only the commit failed. Commit that answer and run the
                # model only for the messages that joined the batch since.
                self._log("reply_retried", channel=batch.channel, model=batch.model.key, n=len(rkey) - 3)
                if not self._commit(files, summary, report, key=rkey):
                    return False
                answered = set(rkey[3:])
                batch.messages[:] = [m for m in batch.messages if m.rel not in answered]
            if not batch.messages:
                return True
            result, error = self._invoke(batch)
        except Interrupted:
            return False  # no reply: the batch runs again after a restart (the cursor stays put)
        except BusError as exc:
            self._error("dispatch_error", channel=batch.channel, model=batch.model.key, error=exc.message)
            return False
        with self._count_lock:
            report.dispatched += len(batch.messages)
            self._counts["dispatched"] += len(batch.messages)
        # What a reply may hold, with room for the error line in front of a failed one (bounded here too).
        answer, cut = fit_body(result.strip(), MAX_BODY_BYTES - ERROR_CHARS * 4 - 2)
        if cut:
            error = error or too_large(cut)
        if error is None and answer:
            return self._reply(batch, answer, report, failed=None)
        if error is None:
            self._log("dispatch_silent", channel=batch.channel, model=batch.model.key, n=len(batch.messages))
            with self._count_lock:
                report.silent += 1
                self._counts["silent"] += 1
            return True
        return self._fail_batch(batch, error, answer, report)

    def _take_retained(self, batch: Batch) -> list[tuple[tuple[str, ...], tuple[dict[str, str], str]]]:
        """The replies kept from last tick for messages of this batch: each kept batch whose messages all
        still wait in this one (the batch may have grown since). One that only partly overlaps runs again."""
        head = _batch_key(batch)[:3]
        rels = {m.rel for m in batch.messages}
        with self._count_lock:
            keys = [k for k in self._retained if k[:3] == head and set(k[3:]) <= rels]
            return [(k, self._retained.pop(k)) for k in keys]

    def _fail_batch(self, batch: Batch, error: str, answer: str, report: TickReport) -> bool:
        """A failed reply to every message of the batch: the error (one line, bounded), then what the model said."""
        error = " ".join(error.split())[:ERROR_CHARS] or "failed"
        self._log("dispatch_failed", "warn", channel=batch.channel, model=batch.model.key, error=error)
        with self._count_lock:
            report.failed += 1
            self._counts["failed"] += 1
        return self._reply(batch, error + (f"\n\n{answer}" if answer else ""), report, failed=error)

    def drop_taken(self, batch: Batch, head: str, report: TickReport) -> bool:
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
            cancel=self._cancel,
            log=self._log,
            error=self._error,
        )

    def _reply(self, batch: Batch, body: str, report: TickReport, *, failed: str | None) -> bool:
        """One reply per distinct asker, re: that asker's messages; all in one commit."""
        files = batch_replies(batch, self.alias, body, failed=failed)
        sender = f"{batch.model.key}@{self.alias}"
        summary = f"crosstalk: {'failed ' if failed else ''}reply from {sender} ({len(batch.messages)} message(s))"
        return self._commit(files, summary, report, key=_batch_key(batch))

    def reject(self, rejections: list[Rejection], report: TickReport) -> bool:
        """Failed replies for messages no model can take (an ambiguous bare name, an unreadable file)."""
        for item in rejections:
            self._log("dispatch_failed", "warn", channel=item.channel, model=item.addressee, error=item.error)
        files = failed_replies(rejections, self.alias)
        report.rejected += len(rejections)
        with self._count_lock:
            self._counts["failed"] += len(rejections)
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
            self._log("reply", path=path)
        if result.push_error:
            self._error("push_failed", error=result.push_error)
        return True


def _batch_key(batch: Batch) -> tuple[str, ...]:
    """One batch's identity across ticks: its channel, model, persona and messages."""
    return (batch.channel, batch.model.key, batch.as_ or "", *(m.rel for m in batch.messages))
