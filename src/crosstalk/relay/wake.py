"""The git bus's wake through the relay: after each push, a dispatcher whose state root joined a relay publishes a
wake on `crosstalk.v1.wake.<transport key>.<alias>`; the other machines' dispatchers of that transport hear it and
tick at once (an ls-remote, then the fetch), instead of at their next poll. The dispatcher holds this connection
itself, in a thread of its own (docs/dev/relay.md, "The bus wake", says why); `crosstalk daemon dispatch` plugs it
in as the loop's `RemoteWake` (crosstalk.bus.dispatch.remote), which also bounds how often wakes can make it tick.

A relay down, refusing or never reached changes nothing else: the dispatcher polls as it always does, the reason is
in its log (once per change), and the connection comes back on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crosstalk.relay.config import ALIAS_RE, RelayConfig
from crosstalk.relay.link import PERMISSIONS, Link, describe

if TYPE_CHECKING:
    from crosstalk.bus.transport.transports import Transport
    from crosstalk.registry.paths import StatePaths

PREFIX = "crosstalk.v1.wake"
PAYLOAD = b'{"v":1}'  # what a wake carries: nothing a receiver trusts; the subject says which transport and machine
KEY_HEX = 16
MAX_HEARD = 64  # machines remembered between two takes (one token each; the server ties a token to its machine)
CLOSE_TIMEOUT_S = 3.0

Log = Callable[..., None]  # the dispatcher's EventLog: log(event, level, **fields)


def transport_key(root_commits: str) -> str:
    """The token every clone of one transport shares and no other transport has: a hash of its root commit (the
    output of `git rev-list --max-parents=0 HEAD`; the first in sorted order when there are several)."""
    roots = sorted(root_commits.split())
    if not roots:
        raise ValueError("the transport has no commit yet")
    return hashlib.sha256(b"crosstalk bus wake\0" + roots[0].encode()).hexdigest()[:KEY_HEX]


def wake_subject(key: str, alias: str) -> str:
    return f"{PREFIX}.{key}.{alias}"


def wake_filter(key: str) -> str:
    """What a machine of the transport subscribes to: every machine's wakes for it."""
    return f"{PREFIX}.{key}.*"


def alias_of(subject: str, key: str) -> str | None:
    """The waking machine's alias, from the subject the server delivered (its permissions tie it to that machine)."""
    head, _, alias = subject.rpartition(".")
    return alias if head == f"{PREFIX}.{key}" and ALIAS_RE.fullmatch(alias) else None


class RelayWake:
    """crosstalk.bus.dispatch.remote.RemoteWake over NATS. `start()` runs the connection in a daemon thread that
    keeps trying; `announce()` publishes (dropped while not connected: the others' poll covers it); a wake heard
    from another machine makes `fileno()` readable until `take()`."""

    def __init__(self, config: RelayConfig, key: str, log: Log) -> None:
        self.config = config
        self.key = key
        self.log = log
        self.connected = False
        self.announced = 0
        self.dropped = 0  # announcements made while the relay was not connected
        self._r, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.Lock()
        self._heard: dict[str, None] = {}
        self._pending = False
        self._said: str | None = None  # the last down reason logged, so a relay down is one line, not one a retry
        self._refused = False
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._link: Link | None = None
        self._thread = threading.Thread(target=self._run, name="relay-wake", daemon=True)

    # ------------------------------------------------------------------------------------------ the loop's side

    def start(self) -> RelayWake:
        self._thread.start()
        return self

    def fileno(self) -> int:
        return self._r

    def take(self) -> list[str]:
        with self._lock:
            with contextlib.suppress(BlockingIOError):
                os.read(self._r, 4096)
            heard, self._heard, self._pending = list(self._heard), {}, False
        return heard

    def announce(self) -> None:
        if not self.connected:
            self.dropped += 1
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed: the dispatcher is stopping
            self._loop.call_soon_threadsafe(self._publish)

    def close(self) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._set_stop)
            self._thread.join(CLOSE_TIMEOUT_S)
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # ------------------------------------------------------------------------------------------ the thread

    def _set_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        except Exception as exc:  # never the dispatcher's problem: it polls on
            self.log("relay_wake_off", "error", reason=f"{type(exc).__name__}: {describe(exc)}", fallback="poll")
        finally:
            self.connected = False
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        link = self._link = Link(self.config, on_error=self._on_error, on_state=self._on_state)
        try:
            connecting = asyncio.ensure_future(
                link.connect(keep_trying=True, name=f"crosstalk bus wake {self.config.alias}")
            )
            stopping = asyncio.ensure_future(self._stop.wait())
            await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not connecting.done():
                connecting.cancel()
                return
            connecting.result()
            await link.nc.subscribe(wake_filter(self.key), cb=self._on_msg)
            await stopping
        finally:
            await link.close()

    async def _on_state(self, state: str) -> None:
        self.connected = state == "connected"
        if self.connected:
            self._said = None
            self.log("relay_wake_up", url=self.config.url, subject=wake_subject(self.key, self.config.alias))
        else:
            self._down("disconnected")

    async def _on_error(self, exc: BaseException) -> None:
        why = describe(exc)
        if PERMISSIONS in str(exc).lower():
            if not self._refused:
                self._refused = True
                self.log(
                    "relay_wake_refused", "warn", reason=why, fallback="poll",
                    needs=f"publish {PREFIX}.*.{self.config.alias}, subscribe {PREFIX}.> (docs/relay.md)",
                )  # fmt: skip
            return
        if not self.connected:
            self._down(why)

    def _down(self, why: str) -> None:
        if why != self._said:
            self._said = why
            self.log("relay_wake_down", "warn", url=self.config.url, reason=why, fallback="poll")

    def _publish(self) -> None:
        link = self._link
        if link is None or not self.connected:
            self.dropped += 1
            return
        self.announced += 1
        task = asyncio.ensure_future(link.nc.publish(wake_subject(self.key, self.config.alias), PAYLOAD))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a publish lost in a drop: the poll covers it

    async def _on_msg(self, msg: Any) -> None:
        alias = alias_of(msg.subject, self.key)
        if alias is None or alias == self.config.alias:
            return  # our own wake (the server echoes it), or not a wake of this transport
        with self._lock:
            if len(self._heard) < MAX_HEARD:
                self._heard[alias] = None
            if not self._pending:
                self._pending = True
                with contextlib.suppress(BlockingIOError):
                    os.write(self._w, b"w")


def for_transport(transport: Transport, paths: StatePaths, log: Log) -> RelayWake | None:
    """The started wake of a transport with a remote whose state root joined a relay; None (with the reason logged
    when there is one) otherwise: the dispatcher then polls alone, as before."""
    from crosstalk.bus.errors import BusError
    from crosstalk.relay.config import joined, load
    from crosstalk.relay.errors import RelayConfigError

    if not joined(paths):
        return None
    try:
        config = load(paths)
        repo = transport.git()
        if config is None or not repo.has_remote():
            return None
        key = transport_key(repo.run("rev-list", "--max-parents=0", "HEAD"))
    except (RelayConfigError, BusError, ValueError) as exc:
        log("relay_wake_off", "warn", reason=str(exc), fallback="poll")
        return None
    return RelayWake(config, key, log).start()
