"""The dispatcher's bus wake follows this state root's relay join (`crosstalk relay join` / `leave`) without a restart.

`FollowedWake` is the `RemoteWake` `crosstalk daemon dispatch` plugs in (crosstalk.bus.dispatch.remote). The loop
calls `refresh()` once per pass; it costs one stat of relay/relay.json (join writes it whole by rename, leave
unlinks it, so its inode, mtime and size change with every join or leave). When they changed, the join is read
again: a new join (or a join to another URL, alias or credentials file) starts a `RelayWake` (relay/wake.py), a leave
closes the running one, off the loop's thread, so the dispatcher never waits on a NATS close. Between joins
`fileno()` is a pipe nothing writes, so the loop waits on its poll alone, as before.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING

from crosstalk.relay.config import config_path
from crosstalk.relay.wake import Log, RelayWake, for_transport

if TYPE_CHECKING:
    from crosstalk.bus.transport.transports import Transport
    from crosstalk.registry.paths import StatePaths

Signature = tuple[int, int, int] | None  # (inode, mtime_ns, size) of relay.json; None: not joined
UNREAD = (-1, -1, -1)  # before the first refresh: differs from every signature, None included


class FollowedWake:
    def __init__(self, transport: Transport, paths: StatePaths, log: Log) -> None:
        self.transport = transport
        self.paths = paths
        self.log = log
        self.inner: RelayWake | None = None
        self._seen: Signature = UNREAD
        self._idle_r, self._idle_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # never written: "no wake"
        self.refresh()

    def _signature(self) -> Signature:
        try:
            st = os.stat(config_path(self.paths))
        except FileNotFoundError:
            return None
        except OSError:
            return self._seen  # unreadable this once (a state root moved under us): change nothing
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def refresh(self) -> None:
        """Follow a join or leave since the last call: one stat when nothing changed."""
        seen = self._signature()
        if seen == self._seen:
            return
        self._seen = seen
        old, self.inner = self.inner, None
        if old is not None:
            self.log("relay_wake_off", reason="the relay join changed", fallback="poll")
            threading.Thread(target=old.close, name="relay-wake-close", daemon=True).start()
        if seen is not None:
            self.inner = for_transport(self.transport, self.paths, self.log)

    def fileno(self) -> int:
        inner = self.inner
        return inner.fileno() if inner is not None else self._idle_r

    def take(self) -> list[str]:
        inner = self.inner
        return inner.take() if inner is not None else []

    def announce(self) -> None:
        if self.inner is not None:
            self.inner.announce()

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
            self.inner = None
        for fd in (self._idle_r, self._idle_w):
            with contextlib.suppress(OSError):
                os.close(fd)
