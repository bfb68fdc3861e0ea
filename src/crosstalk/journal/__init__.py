"""The per-agent durable journal: append-only JSONL, one writer, fsync before acknowledgement."""

from crosstalk.journal.errors import JournalError, JournalLocked, JournalWriteError
from crosstalk.journal.replay import JournalState, MessageEntry
from crosstalk.journal.writer import Journal

__all__ = ["Journal", "JournalError", "JournalLocked", "JournalState", "JournalWriteError", "MessageEntry"]
