"""Qwen Code's delivery receipts: how a process that writes into a Qwen session learns what became of each message
(cross-session protocol section 5; docs/dev/qwen-adapter.md has what 0.24.4 does).

A frame names our inbox (`from`) and its token (`replyToken`); the receiving session answers every outcome on a new
connection to that inbox: the auth line with our token, then one JSON line

    {"msgV":1,"type":"control","action":"delivery_status","status":S,"origMsgId":<our msgId>,"reason":…,
     "dropReason"?:…,"droppedMsgIds"?:[…]}

S is held, delivered, denied, refused, expired, misaddressed or dropped, applied as transitions (pending → any;
held → delivered | denied | expired | misaddressed; delivered → expired | misaddressed; anything else a repeat).
So each writing process binds one inbox (`inbox()`), in a directory of its own (0700), and keeps it as long as it
lives. Blocking sockets and threads, no asyncio: `crosstalk send` may use it; the shim hands receipts to its loop.
Every read is capped; a connection from another uid, or without our token, is dropped unread; a receipt counts only
from the process the message was written to.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from crosstalk.core.errors import UntrustedInput
from crosstalk.core.states import State
from crosstalk.core.untrusted import loads
from crosstalk.fs import trace
from crosstalk.harness.base import InjectResult
from crosstalk.harness.receipt_inbox import MAX_RECEIPT_BYTES, InboxServer, alive, prune, read_all

GONE_GRACE_S = 2.0  # how long a session that ended may take to send its `expired` receipts
# How long a delivered message is still listened for: Qwen answers `expired` when the session exits with it unread and
# `misaddressed` when `/clear` or `/resume` swaps the session first, which may be long after a busy turn ends.
LATE_WINDOW_S = 600.0
NEXT = {
    None: frozenset({"held", "delivered", "denied", "refused", "expired", "misaddressed", "dropped"}),
    "held": frozenset({"delivered", "denied", "expired", "misaddressed"}),
    "delivered": frozenset({"expired", "misaddressed"}),
}
FINAL = frozenset({"denied", "refused", "expired", "misaddressed", "dropped"})
QUEUED_REASON = (
    "delivered: Qwen Code queued it for its model; an idle session starts a turn with it at once, a busy one "
    "after its running turn ends (it never joins a running turn)"
)


@dataclass(frozen=True, slots=True)
class Receipt:
    message_id: str
    status: str  # the protocol's word, or "gone" (the session ended holding it and said nothing)
    reason: str | None = None
    drop_reason: str | None = None


def result_of(receipt: Receipt) -> InjectResult:
    """The one delivery state a receipt says."""
    evidence: dict[str, object] = {"qwen": "receipt", "receipt": receipt.status}
    if receipt.drop_reason:
        evidence["drop_reason"] = receipt.drop_reason
    words = f" ({receipt.reason[:200]})" if receipt.reason else ""
    status = receipt.status
    if status == "delivered":
        return InjectResult(State.QUEUED, QUEUED_REASON, evidence)
    if status == "held":
        return InjectResult(
            State.HELD, "held: the receiving Qwen Code session holds it for its user (/peers)", evidence
        )
    if status == "denied":
        return InjectResult(State.REJECTED, f"denied: the receiving user declined it{words}", evidence)
    if status == "refused":
        return InjectResult(
            State.REJECTED, "refused: the receiving session's settings refuse cross-session messages "
            "(agents.crossSessionInbound)", evidence,
        )  # fmt: skip
    if status == "expired":
        return InjectResult(State.UNREACHABLE, f"expired: it never reached the model{words}", evidence)
    if status == "misaddressed":
        return InjectResult(
            State.UNREACHABLE, "misaddressed: the session at that inbox changed (/clear or /resume) before it arrived",
            evidence,
        )  # fmt: skip
    if status == "dropped":
        why = receipt.drop_reason or "dropped"
        return InjectResult(State.UNREACHABLE, f"dropped by the receiving session's inbox ({why}); not delivered",
                            evidence)  # fmt: skip
    return InjectResult(
        State.UNKNOWN, "the receiving session ended while holding it and said nothing of what became of it", evidence
    )


def parse(raw: bytes, token: str) -> list[Receipt]:
    """The receipts in one connection's bytes; nothing unless its first line is the auth line with `token`."""
    lines = raw.splitlines()
    try:
        auth = loads(lines[0], what="a Qwen auth line", max_bytes=4096) if lines else None
    except UntrustedInput:
        return []
    if not isinstance(auth, dict) or auth.get("type") != "auth" or auth.get("token") != token:
        return []
    out = []
    for line in lines[1:]:
        try:
            data = loads(line, what="a Qwen receipt", max_bytes=MAX_RECEIPT_BYTES)
        except UntrustedInput:
            continue
        if not isinstance(data, dict) or data.get("type") != "control" or data.get("action") != "delivery_status":
            continue
        mid, status = data.get("origMsgId"), data.get("status")
        if not isinstance(mid, str) or not isinstance(status, str):
            continue
        reason, drop = data.get("reason"), data.get("dropReason")
        receipt = Receipt(mid, status, reason if isinstance(reason, str) else None,
                          drop if isinstance(drop, str) else None)  # fmt: skip
        out.append(receipt)
        more = data.get("droppedMsgIds") if status == "dropped" else None
        for other in (more if isinstance(more, list) else [])[:256]:
            if isinstance(other, str):
                out.append(Receipt(other, status, receipt.reason, receipt.drop_reason))
    return out


Callback = Callable[[Receipt], None]


@dataclass(slots=True)
class _Expected:
    peer_pid: int
    callback: Callback | None
    receipts: list[Receipt] = field(default_factory=list)
    status: str | None = None
    gone_since: float | None = None
    settled_at: float | None = None  # when it was delivered or settled (kept LATE_WINDOW_S more, then forgotten)


class ReceiptInbox(InboxServer):
    """One listening socket for this process's frames. `expect` a msgId before writing it; `wait` for its first
    receipt; every receipt that is a transition also goes to its callback (on a reader thread)."""

    def __init__(self, directory: Path) -> None:
        prune(str(directory))
        self.token = secrets.token_hex(32)
        self._expected: dict[str, _Expected] = {}
        super().__init__(str(directory / f"{os.getpid()}-{secrets.token_hex(4)}.sock"), thread_name="qwen-receipts")

    def expect(self, message_id: str, peer_pid: int, callback: Callback | None = None) -> None:
        with self._cond:
            self._expected[message_id] = _Expected(peer_pid, callback)

    def forget(self, message_id: str) -> None:
        with self._cond:
            self._expected.pop(message_id, None)

    def wait(self, message_id: str, timeout_s: float) -> Receipt | None:
        """The first receipt for `message_id`, waiting at most `timeout_s` for it."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                entry = self._expected.get(message_id)
                if entry is None:
                    return None
                if entry.receipts:
                    return entry.receipts[0]
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def _read(self, conn: socket.socket, pid: int) -> None:
        """One connection: its receipts are applied before it is closed (a writer that saw our EOF was heard)."""
        for receipt in parse(read_all(conn), self.token):
            self._record(receipt, pid)

    def _record(self, receipt: Receipt, pid: int) -> None:
        with self._cond:
            entry = self._expected.get(receipt.message_id)
            if entry is None or (entry.peer_pid and pid != entry.peer_pid):
                return  # not ours, or not from the session it was written to
            if receipt.status not in NEXT.get(entry.status, frozenset()):
                return  # a repeat, or a word the protocol does not allow here
            entry.status = receipt.status
            entry.receipts.append(receipt)
            trace.mark("harness_receipt", harness="qwen", status=receipt.status)
            if receipt.status == "delivered" or receipt.status in FINAL:
                entry.settled_at = time.monotonic()  # forgotten by the sweep; a final word is the last one anyway
            self._cond.notify_all()
            callback = entry.callback
        if callback is not None:
            with contextlib.suppress(Exception):  # a callback never stops the reader
                callback(receipt)

    def _tick(self) -> None:
        """Delivered messages are listened for LATE_WINDOW_S; a held one whose session ended without a word is
        settled `gone`."""
        now, gone = time.monotonic(), []
        with self._cond:
            for mid, entry in list(self._expected.items()):
                if entry.settled_at is not None and now - entry.settled_at > LATE_WINDOW_S:
                    del self._expected[mid]
                elif entry.status == "held" and not alive(entry.peer_pid):
                    entry.gone_since = entry.gone_since or now
                    if now - entry.gone_since >= GONE_GRACE_S:
                        del self._expected[mid]
                        gone.append(entry)
                        entry.receipts.append(Receipt(mid, "gone"))
        for entry in gone:
            if entry.callback is not None:
                with contextlib.suppress(Exception):
                    entry.callback(entry.receipts[-1])


def inbox_dir(environ: dict[str, str] | None = None) -> Path | None:
    """A directory of this user's, 0700, not a symlink: `$XDG_RUNTIME_DIR/crosstalk-qwen`, else
    `/tmp/crosstalk-qwen-<uid>`; None when neither can be had."""
    env = os.environ if environ is None else environ
    bases = [Path(env["XDG_RUNTIME_DIR"]) / "crosstalk-qwen"] if env.get("XDG_RUNTIME_DIR") else []
    for directory in [*bases, Path(f"/tmp/crosstalk-qwen-{os.geteuid()}")]:
        with contextlib.suppress(OSError):
            directory.mkdir(mode=0o700, exist_ok=True)
            st = os.lstat(directory)
            private = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077
            if private and len(str(directory)) < 80:
                return directory
    return None


_inbox: ReceiptInbox | None = None
_lock = threading.Lock()


def inbox(environ: dict[str, str] | None = None) -> ReceiptInbox | None:
    """This process's inbox (bound on first use), or None when none can be bound."""
    global _inbox
    with _lock:
        if _inbox is None or _inbox.closed:
            directory = inbox_dir(environ)
            if directory is None:
                return None
            try:
                _inbox = ReceiptInbox(directory)
            except OSError:
                return None
        return _inbox


@atexit.register
def _close() -> None:
    with _lock:
        if _inbox is not None:
            _inbox.close()


def late_result(receipt: Receipt) -> InjectResult:
    """A later receipt's state, for the late-outcome path (core.states.LATE_STATES): the same one state `result_of`
    gives each word (a held message the user released is `queued`, as one delivered at once is: Qwen queued it for
    its model, which sees it when the session is idle), said as a later word."""
    result = result_of(receipt)
    if result.state is State.QUEUED:
        return InjectResult(State.QUEUED, f"released by its user; {QUEUED_REASON}", result.evidence)
    return result
