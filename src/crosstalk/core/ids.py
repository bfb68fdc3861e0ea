"""Identifiers: uuidv7 message ids, agent ids and hop-chain entries."""

from __future__ import annotations

import _thread
import os
import time

# The shapes below are checked with str methods, not `re`: `crosstalk send` checks ids and its --from at start-up,
# and `re` (with enum and functools) costs about a bare interpreter start there (docs/performance.md, "Lean send
# path"). tests/unit/core/test_core_lean_shapes.py holds each to its regular expression, quoted in its docstring.
_HEX = frozenset("0123456789abcdef")
_UUID_DASHES = (8, 13, 18, 23)
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_SCHEME = _ALNUM | frozenset("._-")


def _is_hex(value: str, length: int) -> bool:
    return len(value) == length and _HEX.issuperset(value)


# uuidv7 is written out here rather than imported: on Python 3.11 the stdlib has no uuid7, the uuid6 package costs
# ~34 ms to import (it pulls in email and importlib.metadata) and uuid_utils ~6-8 ms, while `crosstalk send` has a
# start-up budget of a few times the bare interpreter (~10 ms). RFC 9562 §5.7 with the §6.2 method 3 monotonic
# counter: 48-bit ms timestamp, 12-bit counter in rand_a, 62 random bits in rand_b.
_last_ms = 0
_counter = 0
_id_lock = _thread.allocate_lock()  # threading.Lock itself: `threading` costs ~1 ms on send's start-up path


def new_message_id() -> str:
    """A fresh uuidv7 (time-ordered, RFC 9562) as a lowercase string; ids from one process sort in creation order."""
    global _last_ms, _counter
    with _id_lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms, _counter = ms, int.from_bytes(os.urandom(2), "big") & 0x1FF  # random start, room to count
        else:
            _counter += 1
            if _counter > 0xFFF:  # counter exhausted within one ms: borrow the next millisecond
                _last_ms, _counter = _last_ms + 1, 0
            ms = _last_ms
        counter = _counter  # read under the lock: another thread may move it the moment the lock is released
    rand_b = int.from_bytes(os.urandom(8), "big") & 0x3FFF_FFFF_FFFF_FFFF
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def is_message_id(value: object) -> bool:
    """True for a canonical lowercase UUID string (any version: peers may use uuid4):
    `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\Z`."""
    return (
        isinstance(value, str)
        and len(value) == 36
        and all(value[i] == "-" for i in _UUID_DASHES)
        and _HEX.issuperset(value[:8] + value[9:13] + value[14:18] + value[19:23] + value[24:])
    )


def agent_id_for(harness: str, session_ref: str) -> str:
    """agent_id = first 16 hex of sha256("<harness>:<session_ref>") so a session keeps its id across restarts."""
    if not harness or not session_ref:
        raise ValueError("agent_id needs a harness and a session_ref")
    import hashlib  # not at module level: `crosstalk send` never hashes, and hashlib costs ~2 ms to import

    return hashlib.sha256(f"{harness}:{session_ref}".encode()).hexdigest()[:16]


def is_agent_id(value: object) -> bool:
    """16 lowercase hex: `^[0-9a-f]{16}\\Z`."""
    return isinstance(value, str) and _is_hex(value, 16)


def hop_entry(agent_id: str) -> str:
    """The 24-hex hop-chain entry for an agent (Claude's convention: a sha256 prefix)."""
    import hashlib

    return hashlib.sha256(f"hop:{agent_id}".encode()).hexdigest()[:24]


def is_external_tag(value: str | None) -> bool:
    """An external sender's tag, @scheme:topic (crosstalk send --from @ci:build):
    `^@[A-Za-z0-9][A-Za-z0-9._-]*:[^\\s]+\\Z` (core/sender.py holds it as EXTERNAL_TAG_RE). Here rather than in
    core/sender.py, beside the record it classes: `crosstalk send` checks its --from at start-up."""
    if not value or value[0] != "@":
        return False
    scheme, colon, topic = value[1:].partition(":")
    return (
        bool(colon and scheme and topic)
        and scheme[0] in _ALNUM
        and _SCHEME.issuperset(scheme)
        and not any(c.isspace() for c in topic)
    )


def is_hop_entry(value: object) -> bool:
    """24 lowercase hex: `^[0-9a-f]{24}\\Z`."""
    return isinstance(value, str) and _is_hex(value, 24)
