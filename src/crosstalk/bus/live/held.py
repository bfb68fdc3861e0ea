"""Bus messages for live agents on this machine that are down: held, and delivered when the agent is back.

A channel message `to: NAME@<alias>` goes into the live agent NAME's session through the bridge. When NAME is not
running (its session closed, its machine asleep), the message is not dropped: a reply to something NAME sent, or a
new task for a name an agent here has had, is *held* in the machine-local state (`held.json`). Every tick, idle or
not, offers each held message again; once the agent is live it is delivered (the bridge's derived message id makes
a second offer a duplicate to the receiver: exactly once). A held message older than HOLD_S is given up: a new
task gets a failed reply saying so, a reply is logged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crosstalk.bus.transport.state import read_json, write_json_atomic
from crosstalk.core.states import DELIVERED_STATES

HOLD_S = 24 * 3600.0  # how long a message waits for its live agent to come back
MAX_HELD = 10_000  # a flood of messages to a down agent is held up to this many; past it they are given up at once


@dataclass(frozen=True, slots=True)
class Held:
    channel: str  # channel uuid
    rel: str  # channel-relative path of the message
    agent: str  # the live agent's name
    sender: str  # the message's from:
    to: str  # the message's to:
    is_reply: bool  # it has re: (a given-up reply is logged, never answered with a failure)
    since: float  # epoch seconds it was first held

    @property
    def key(self) -> tuple[str, str]:
        return (self.channel, self.rel)

    @classmethod
    def from_dict(cls, data: Any) -> Held | None:
        """The entry, or None when the record is not one (a hand-edited or damaged file)."""
        if not isinstance(data, dict):
            return None
        try:
            held = cls(
                channel=data["channel"],
                rel=data["rel"],
                agent=data["agent"],
                sender=data["sender"],
                to=data["to"],
                is_reply=data["is_reply"],
                since=data["since"],
            )
        except (KeyError, TypeError):
            return None
        strings = (held.channel, held.rel, held.agent, held.sender, held.to)
        if not all(isinstance(s, str) and s for s in strings) or not isinstance(held.is_reply, bool):
            return None
        if isinstance(held.since, bool) or not isinstance(held.since, int | float):
            return None
        return held


class HeldMessages:
    """The held set of one transport on this machine, kept in `path` (rewritten atomically on every change)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        raw = read_json(path)
        entries = [Held.from_dict(d) for d in (raw.get("held", []) if isinstance(raw, dict) else [])]
        self._held: dict[tuple[str, str], Held] = {h.key: h for h in entries if h is not None}

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[Held]:
        return iter(list(self._held.values()))  # a copy: callers drop entries while they walk

    def hold(self, entries: list[Held]) -> list[Held]:
        """Add entries (one already held keeps its first `since`); those refused because the set is full."""
        full: list[Held] = []
        added = False
        for h in entries:
            if h.key in self._held:
                continue
            if len(self._held) >= MAX_HELD:
                full.append(h)
                continue
            self._held[h.key] = h
            added = True
        if added:
            self._save()
        return full

    def drop(self, keys: list[tuple[str, str]]) -> None:
        if keys:
            for k in keys:
                self._held.pop(k, None)
            self._save()

    def expired(self, now: float | None = None) -> list[Held]:
        now = time.time() if now is None else now
        return [h for h in self._held.values() if now - h.since >= HOLD_S]

    def _save(self) -> None:
        write_json_atomic(self.path, {"held": [asdict(h) for h in self._held.values()]})


def release(
    held: HeldMessages,
    live_agent: Callable[[str], str | None],
    deliver: Callable[[Held, str], str],
    give_up: Callable[[list[Held]], bool],
) -> int:
    """Offer every held message whose agent is live again (`deliver(entry, agent)` returns the bridge's state);
    give up the expired ones (`give_up` answers them; False: try again next tick). Returns how many were
    delivered."""
    if not len(held):
        return 0
    done: list[tuple[str, str]] = []
    delivered = 0
    for h in held:
        agent = live_agent(h.agent)
        if agent is None:
            continue
        state = deliver(h, agent)
        if state == "unreachable":  # live by its descriptor, its socket not answering yet: next tick
            continue
        done.append(h.key)
        delivered += state in DELIVERED_STATES
    held.drop(done)
    expired = [h for h in held.expired() if h.key not in set(done)]
    if expired and give_up(expired):
        held.drop([h.key for h in expired])
    return delivered
