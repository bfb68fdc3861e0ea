"""One agent's journal, followed by what was appended since the last look.

The file is stat'ed first: an unchanged size and inode means nothing is read. Growth is read from the last offset
and applied to the same JournalState the agent rebuilds itself from (crosstalk.journal.replay), so what watch shows
is what the agent knows. Retention rewrites a journal into a new inode: then it is read again from the start.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from crosstalk.core.states import UNRESOLVED_STATES, State
from crosstalk.journal import records as R
from crosstalk.journal.replay import JournalState, MessageEntry

# What receive_message lists by default (crosstalk.shim.mailbox.NEEDS_ATTENTION): not yet dealt with by the session.
# A held message is not the session's to deal with: its user decides first, and its model must not read it before.
NEEDS_ATTENTION = frozenset({*UNRESOLVED_STATES, State.UNREACHABLE} - {State.HELD})
MAX_REJECTED = 200  # refused messages kept per agent (the newest)


class JournalTail:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.state = JournalState()
        self.rejected: list[dict[str, Any]] = []  # audit records of refused messages; JournalState keeps none
        self._inode: int | None = None
        self._offset = 0

    def refresh(self) -> bool:
        """Apply what was appended since the last call; True when anything changed."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            changed = self._inode is not None
            if changed:
                self._reset(None)
            return changed
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return False
            if st.st_ino != self._inode or st.st_size < self._offset:
                self._reset(st.st_ino)
            if st.st_size == self._offset:
                return False
            os.lseek(fd, self._offset, os.SEEK_SET)
            data = b""
            while chunk := os.read(fd, 1 << 20):
                data += chunk
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1  # a trailing partial line is an append under way: read it next time
        self._offset += end
        for line in data[:end].splitlines():
            self._apply(line)
        return end > 0

    def _reset(self, inode: int | None) -> None:
        self.state, self.rejected, self._inode, self._offset = JournalState(), [], inode, 0

    def _apply(self, line: bytes) -> None:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            return
        if not isinstance(rec, dict):
            return
        if rec.get("type") == R.REJECTED:
            self.rejected.append(rec)
            del self.rejected[:-MAX_REJECTED]
        try:
            self.state.apply(rec)
        except (KeyError, TypeError, ValueError, AttributeError):  # a damaged record is skipped, as replay would
            return

    # ------------------------------------------------------------------ what the agent owes and has waiting
    def open_asks(self) -> int:
        return self.state.open_asks()

    def asks_waiting(self) -> int:
        return sum(1 for r in self.state.routes.values() if r.get("state") == "open")

    def unread(self) -> int:
        return sum(1 for e in self.state.messages.values() if needs_attention(self.state, e))


def needs_attention(state: JournalState, entry: MessageEntry) -> bool:
    """receive_message's default (`unresolved`) filter: not resolved, and undelivered or owed a reply."""
    if entry.resolved:
        return False
    return entry.state in NEEDS_ATTENTION or state.reply_owed(entry.message_id)
