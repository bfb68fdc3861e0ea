"""The bus's wake across machines, as the dispatcher sees it: a `RemoteWake` tells the other machines of this
transport that this machine pushed, and makes a descriptor readable when one of them did (crosstalk.relay.wake is
the NATS one; `crosstalk daemon dispatch` plugs it in, so bus never imports relay). `WakeGate` bounds how often the
other machines' wakes can make this dispatcher tick, so a flood of wakes costs at most a bounded rate of remote
requests, whoever sends it. docs/dev/relay.md ("The bus wake")."""

from __future__ import annotations

from typing import Protocol

WAKE_RATE_PER_S = 1.0  # wake-caused ticks a flood can buy, sustained
WAKE_BURST = 3.0  # and at once: a conversation's few wakes never wait


class RemoteWake(Protocol):
    def fileno(self) -> int:
        """Readable once another machine of this transport said it pushed (until take())."""
        ...

    def take(self) -> list[str]:
        """The machines heard since the last take (their aliases, each once); clears fileno's readiness."""
        ...

    def announce(self) -> None:
        """This machine pushed: tell the others. Never blocks and never raises (a relay down is logged, once)."""
        ...

    def refresh(self) -> None:
        """Called once per pass of the loop: follow a change of the machine's relay join (cheap: one stat)."""
        ...

    def close(self) -> None: ...


class WakeGate:
    """A token bucket over wake-caused ticks: `delay(now)` is how long the next one must wait (0: tick now), and
    takes its token. Refilled at WAKE_RATE_PER_S up to WAKE_BURST."""

    def __init__(self, rate: float = WAKE_RATE_PER_S, burst: float = WAKE_BURST) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._at: float | None = None

    def delay(self, now: float) -> float:
        if self._at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        wait = (1.0 - self._tokens) / self.rate
        self._tokens, self._at = 0.0, now + wait  # the token that refills by then is this tick's
        return wait
