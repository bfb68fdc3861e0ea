"""Hop guard: refuse a message that has looped or travelled too far.

The chain runs it before policy, so a loop is refused whoever sent it.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_HOPS = 32


def check_hops(chain: Sequence[str], self_entry: str) -> str | None:
    """None when the chain may continue through us, else "hop:loop" or "hop:too_long".

    Entries are 24-hex hop entries (crosstalk.core.ids.hop_entry); we only compare them, never parse them.
    """
    # Our own entry already present means the message has come back round: delivering it again would loop.
    if self_entry in chain:
        return "hop:loop"
    # A repeat anywhere is a loop between other agents that will not end by itself.
    if len(set(chain)) != len(chain):
        return "hop:loop"
    if len(chain) > MAX_HOPS:
        return "hop:too_long"
    return None
