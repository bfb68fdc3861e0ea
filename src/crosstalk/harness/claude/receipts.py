"""Claude Code's hold receipts: how a process that writes into a Claude session learns what the session did with it.

Claude 2.1.332 answers nothing on the connection a message is written on. When it does not deliver a frame at once it
tells the frame's reply address (its top-level `from`, `uds:<path>`) instead, on a new connection, one JSON line:

    {"type":"control","action":"peer_message_status","status":"held"|"delivered"|"denied"|"expired"|"dropped",
     "status_detail"?:"refused","reason":…,"orig_msg_id":<the frame's msg_id>,"from":"uds:<its socket>",…}

only when the path has Claude's shape (`ADDRESS`), lies in the receiving session's own socket directory, and its
listening socket belongs to the process that wrote the frame (SO_PEERCRED). So each writing process binds one inbox
in each socket directory it writes into (`inbox_for`), and keeps it as long as it lives. The `held` or refused
receipt is sent as Claude closes the writer's connection (measured: within ~1 ms of the EOF); a frame delivered at
once gets none. docs/dev/claude-adapter.md has the experiment.

Blocking sockets and threads, no asyncio: `crosstalk send` uses it on its start-up path; the shim hands receipts
to its event loop itself. Every read is capped; only the receiving Claude process (its pid, our uid) is heard.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crosstalk.core.errors import UntrustedInput
from crosstalk.core.states import State
from crosstalk.core.untrusted import loads
from crosstalk.harness.base import InjectResult
from crosstalk.harness.receipt_inbox import MAX_RECEIPT_BYTES, InboxServer, alive, prune, read_all

ADDRESS = re.compile(r"^uds:[A-Za-z0-9%:_/.\-]{1,200}$")
GONE_GRACE_S = 2.0  # how long a session that ended may take to send its `expired` receipts
LATE_WINDOW_S = 10.0  # how long a message answered without a receipt is still listened for (a contradicting one)
PREFIX = "crosstalk-"
FINAL = frozenset({"delivered", "denied", "expired", "dropped"})

REFUSED_REASON = "refused: the receiving session's settings refuse cross-session messages (crossSessionInbound)"


@dataclass(frozen=True, slots=True)
class Receipt:
    message_id: str
    status: str  # held | delivered | denied | expired | dropped, or "gone" (the session ended and said nothing)
    detail: str | None = None  # status_detail: "refused"
    reason: str | None = None  # Claude's own words

    @property
    def refused(self) -> bool:
        return self.detail == "refused"

    @property
    def final(self) -> bool:
        return self.status in FINAL or self.status == "gone"


def result_of(receipt: Receipt) -> InjectResult:
    """The delivery state a receipt says: held; delivered → accepted; denied or refused → rejected; expired or
    dropped → unreachable; a session that ended without a word → unknown."""
    evidence: dict[str, object] = {"claude": "receipt", "receipt": receipt.status}
    if receipt.detail:
        evidence["detail"] = receipt.detail
    words = f" ({receipt.reason})" if receipt.reason else ""
    if receipt.refused:
        return InjectResult(State.REJECTED, REFUSED_REASON, evidence)
    if receipt.status == "held":
        return InjectResult(State.HELD, f"held: the receiving session holds it for its user{words}", evidence)
    if receipt.status == "delivered":
        return InjectResult(State.ACCEPTED, None, evidence)
    if receipt.status == "denied":
        return InjectResult(State.REJECTED, f"denied: the receiving user declined it{words}", evidence)
    if receipt.status in ("expired", "dropped"):
        return InjectResult(State.UNREACHABLE, f"{receipt.status}: it never reached the model{words}", evidence)
    return InjectResult(
        State.UNKNOWN, "the receiving session ended while holding it and said nothing of what became of it", evidence
    )


def parse(raw: bytes) -> list[Receipt]:
    """The receipts in one connection's bytes (an auth line and anything else are skipped)."""
    out = []
    for line in raw.splitlines():
        try:
            data = loads(line, what="a Claude receipt", max_bytes=MAX_RECEIPT_BYTES)
        except UntrustedInput:
            continue
        if not isinstance(data, dict) or data.get("action") != "peer_message_status":
            continue
        mid, status = data.get("orig_msg_id"), data.get("status")
        if not isinstance(mid, str) or not isinstance(status, str):
            continue
        detail, reason = data.get("status_detail"), data.get("reason")
        out.append(
            Receipt(
                mid,
                status,
                detail if isinstance(detail, str) else None,
                reason[:300] if isinstance(reason, str) else None,
            )
        )
    return out


Callback = Callable[[Receipt], None]


@dataclass(slots=True)
class _Expected:
    peer_pid: int
    callback: Callback | None
    receipts: list[Receipt]
    gone_since: float | None = None
    waited: bool = False  # `wait` has returned: a final receipt ends the expectation
    waited_at: float = 0.0


class ReceiptInbox(InboxServer):
    """One listening socket in a Claude socket directory, for this process's frames into that directory's sessions.
    `expect` a frame's msg_id before writing it; `wait` for its first receipt after the EOF; every receipt also goes
    to its callback (on a reader thread), until a final one."""

    def __init__(self, directory: str) -> None:
        prune(directory, PREFIX)
        self._expected: dict[str, _Expected] = {}
        path = os.path.join(directory, f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}.sock")
        super().__init__(path, thread_name="claude-receipts")

    @property
    def address(self) -> str | None:
        """The frame's `from` for this inbox, or None when Claude would not send receipts to it (its shape)."""
        address = f"uds:{self.path}"
        return address if ADDRESS.match(address) else None

    def expect(self, message_id: str, peer_pid: int, callback: Callback | None = None) -> None:
        with self._cond:
            self._expected[message_id] = _Expected(peer_pid, callback, [])

    def forget(self, message_id: str) -> None:
        with self._cond:
            self._expected.pop(message_id, None)

    def wait(self, message_id: str, timeout_s: float) -> Receipt | None:
        """The first receipt for `message_id`, waiting at most `timeout_s` for it (0: only one already read)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                entry = self._expected.get(message_id)
                if entry is None:
                    return None
                left = deadline - time.monotonic()
                if entry.receipts or left <= 0:
                    entry.waited, entry.waited_at = True, time.monotonic()
                    if entry.receipts and entry.receipts[-1].final:
                        del self._expected[message_id]
                    return entry.receipts[0] if entry.receipts else None
                self._cond.wait(left)

    # ------------------------------------------------------------------ the reader threads
    def _read(self, conn: socket.socket, pid: int) -> None:
        for receipt in parse(read_all(conn)):
            self._record(receipt, pid)

    def _record(self, receipt: Receipt, pid: int) -> None:
        with self._cond:
            entry = self._expected.get(receipt.message_id)
            if entry is None or (pid and entry.peer_pid and pid != entry.peer_pid):
                return  # not ours, or not from the session it was written into
            entry.receipts.append(receipt)
            if receipt.final and entry.waited:
                del self._expected[receipt.message_id]
            self._cond.notify_all()
            callback = entry.callback
        if callback is not None:  # every receipt, the one `wait` returns too: the receiver of both keeps the first word
            with contextlib.suppress(Exception):  # a callback never stops the reader
                callback(receipt)

    def _tick(self) -> None:
        """A held message whose session ended without a word (killed: no `expired` receipt) is settled unknown; a
        message delivered at once is no longer listened for once LATE_WINDOW_S passed."""
        now = time.monotonic()
        gone: list[tuple[str, _Expected]] = []
        with self._cond:
            for mid, entry in list(self._expected.items()):
                if not entry.receipts:
                    if entry.waited and now - entry.waited_at > LATE_WINDOW_S:
                        del self._expected[mid]  # delivered at once, and nothing has contradicted it since
                    continue
                if alive(entry.peer_pid):
                    continue
                if entry.gone_since is None:
                    entry.gone_since = now
                elif now - entry.gone_since >= GONE_GRACE_S:
                    del self._expected[mid]
                    gone.append((mid, entry))
        for mid, entry in gone:
            if entry.callback is not None:
                with contextlib.suppress(Exception):
                    entry.callback(Receipt(mid, "gone"))


_inboxes: dict[str, ReceiptInbox] = {}
_directories: dict[str, str] = {}  # a session socket's path -> its directory, worked out once
_inboxes_lock = threading.Lock()


def inbox_for(session_socket: str) -> ReceiptInbox | None:
    """This process's inbox beside the Claude session socket `session_socket` (bound on first use), or None when
    none can be bound there (the directory is not ours or not writable)."""
    directory = _directories.get(session_socket)
    if directory is None:
        directory = str(Path(session_socket).parent)
        if len(_directories) < 64:
            _directories[session_socket] = directory
    with _inboxes_lock:
        inbox = _inboxes.get(directory)
        if inbox is None or inbox.closed:
            try:
                inbox = _inboxes[directory] = ReceiptInbox(directory)
            except OSError:
                return None
        return inbox


@atexit.register
def _close_all() -> None:
    with _inboxes_lock:
        for inbox in _inboxes.values():
            inbox.close()
        _inboxes.clear()
