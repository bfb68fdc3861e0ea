"""The relay's errors, in one place."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError, ErrorKind


class RelayConfigError(CrosstalkError):
    """A join that cannot be saved, or a saved join that cannot be used: the message says what and how to fix it."""


class JoinRefused(RelayConfigError):
    """The relay cannot be reached, refused the credentials, or withholds a grant this machine needs."""


class AlreadyServing(RelayConfigError):
    """Another `relay serve` holds this state root's lock."""


class FrameError(CrosstalkError, ValueError):
    """A frame this side cannot read: the detail says what is wrong with it (a wire error)."""

    code = ErrorKind.FAILED
