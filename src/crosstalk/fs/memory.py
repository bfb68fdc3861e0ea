"""Giving freed memory back to the system after a burst of short-lived allocations (a journal compaction).

glibc keeps what a process frees in its heap for reuse; what sits between live blocks, or at the top of the heap
under its trim threshold, stays resident. A compaction parses the whole journal once (a few MB of records that
live a moment), so a long-running agent's resident memory would step up at each one (docs/dev/shim-memory.md).
`malloc_trim(0)` returns the free pages of every heap at once; it costs about a millisecond, once per compaction.
"""

from __future__ import annotations

import sys

_trim: list[object] = []  # [libc.malloc_trim] once looked up, [None] where there is none


def release_freed_memory() -> bool:
    """Return the heap's free pages to the system (glibc's malloc_trim); False where there is no glibc."""
    if not _trim:
        _trim.append(_lookup())
    trim = _trim[0]
    if trim is None:
        return False
    trim(0)  # type: ignore[operator]
    return True


def _lookup() -> object:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
