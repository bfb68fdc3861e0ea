"""One agent's journal, followed by what was appended since the last look.

The file is stat'ed first: an unchanged size and inode means nothing is read. Growth is read from the last offset
and applied to the same JournalState the agent rebuilds itself from (crosstalk.journal.replay), so what watch shows
is what the agent knows. Retention rewrites a journal into a new inode: then it is read again from the start.

A first read is bounded: a running agent keeps its journal small by compaction (journal/window.py), but a journal
it has not compacted yet can be far larger, so only its last MAX_TAIL_BYTES are read (from the first whole line in
them) and what it says about older messages is not shown. The compaction's checkpoint records (dedupe answers of
messages already settled) hold nothing watch shows, and are passed over without being parsed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from crosstalk.core.states import UNRESOLVED_STATES, State
from crosstalk.fs.reading import open_regular
from crosstalk.journal import records as R
from crosstalk.journal.codec import parse_line
from crosstalk.journal.replay import JournalState, MessageEntry

# What receive_message lists by default (crosstalk.shim.mailbox.NEEDS_ATTENTION): not yet dealt with by the session.
# A held message is not the session's to deal with: its user decides first, and its model must not read it before.
NEEDS_ATTENTION = frozenset({*UNRESOLVED_STATES, State.UNREACHABLE} - {State.HELD})
MAX_REJECTED = 200  # refused messages kept per agent (the newest)
MAX_TAIL_BYTES = 16 << 20  # the most of a journal a first read takes, from its end
_CHECKPOINT_PREFIX = b'{"type":"%s"' % R.CHECKPOINT.encode()  # as the journal writer encodes one (codec.encode)


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
            fd = open_regular(self.path)
        except OSError:  # missing, or not a regular file (NotRegularFile): nothing to follow
            changed = self._inode is not None
            if changed:
                self._reset(None)
            return changed
        try:
            st = os.fstat(fd)
            if st.st_ino != self._inode or st.st_size < self._offset:
                self._reset(st.st_ino)
            if st.st_size == self._offset:
                return False
            skip = 0
            if self._offset == 0 and st.st_size > MAX_TAIL_BYTES:
                self._offset = skip = st.st_size - MAX_TAIL_BYTES - 1  # from the byte before: a line may start there
            os.lseek(fd, self._offset, os.SEEK_SET)
            chunks = []  # joined once: appending to one bytes object would copy it again for every chunk
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            data = b"".join(chunks)
        finally:
            os.close(fd)
        start = data.find(b"\n") + 1 if skip else 0  # past the line the bounded read began inside
        end = data.rfind(b"\n") + 1  # a trailing partial line is an append under way: read it next time
        self._offset += max(start, end)
        for line in data[start:end].splitlines():
            self._apply(line)
        return end > start

    def _reset(self, inode: int | None) -> None:
        self.state, self.rejected, self._inode, self._offset = JournalState(), [], inode, 0

    def _apply(self, line: bytes) -> None:
        if line.startswith(_CHECKPOINT_PREFIX):
            return
        rec = parse_line(line)  # None: damage (not JSON, too deep, wrong shape), skipped as replay skips it
        if rec is None:
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
