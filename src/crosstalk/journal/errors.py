"""Journal errors."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError


class JournalError(CrosstalkError):
    """The journal cannot be used."""


class JournalLocked(JournalError):
    """Another process holds this journal's writer lock."""


class JournalWriteError(JournalError):
    """An append did not become durable; nothing of it remains in the file."""
