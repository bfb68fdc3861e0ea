"""One NATS connection as this machine: its credentials, its inbox prefix, and the errors said in plain words.

nats-py is imported here only, and only by the relay's commands and a send to NAME@ALIAS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from crosstalk.relay.config import RelayConfig, credentials_of
from crosstalk.relay.wire import inbox_prefix

CONNECT_TIMEOUT_S = 2.0  # one connection attempt; a send to a relay that is down answers within this
RECONNECT_WAIT_S = 0.5  # the serving process tries again this often, forever
ONE_OFF_RETRY_S = 0.1  # a send or a join tries twice, this far apart
ONE_OFF_BOUND_S = 2 * CONNECT_TIMEOUT_S + 1.0  # and gives up connecting after this long, whatever nats-py does
PING_INTERVAL_S = 5.0  # with 2 pings outstanding: a relay that vanished without a FIN is noticed within ~15 s
PERMISSIONS = "permissions violation"


def describe(exc: BaseException | None) -> str:
    """A connection error in plain words (nats-py's own are terse, some are empty)."""
    if exc is None:
        return "no reason given"
    import nats.errors as ne

    if isinstance(exc, ne.AuthorizationError) or "authorization violation" in str(exc).lower():
        return "the relay refused this machine's credentials (authorization violation)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is nats-server running there?)"
    if isinstance(exc, TimeoutError | ne.TimeoutError):
        return "timed out"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, ne.NoServersError):
        return "no server answered"
    text = str(exc).strip()
    if text.startswith("nats: "):
        text = text[6:].strip("'")
    return text or type(exc).__name__


class Link:
    """A NATS client for this machine. `last_error` keeps the last error the client reported (connect failures arrive
    through nats-py's error callback); `on_error` and `on_state` let the serving process keep its status."""

    def __init__(
        self,
        config: RelayConfig,
        *,
        on_error: Callable[[BaseException], Awaitable[None]] | None = None,
        on_state: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.last_error: BaseException | None = None
        self.permission_errors: list[str] = []
        self.refused = asyncio.Event()  # set at the server's first permissions violation
        self._on_error = on_error
        self._on_state = on_state
        import nats

        self.nc: Any = nats.NATS()

    async def _error(self, exc: BaseException) -> None:
        self.last_error = exc
        if PERMISSIONS in str(exc).lower():
            self.permission_errors.append(str(exc))
            self.refused.set()
        if self._on_error is not None:
            await self._on_error(exc)

    async def _state(self, state: str) -> None:
        if self._on_state is not None:
            await self._on_state(state)

    async def connect(self, *, keep_trying: bool, name: str) -> None:
        """Connect once (a send, a join: raise on failure) or until it works (the serving process)."""
        options = credentials_of(self.config).connect_options()

        async def disconnected() -> None:
            await self._state("disconnected")

        async def reconnected() -> None:
            await self._state("connected")

        connecting = self.nc.connect(
            servers=[self.config.url],
            name=name,
            inbox_prefix=inbox_prefix(self.config.alias),
            connect_timeout=CONNECT_TIMEOUT_S,
            allow_reconnect=keep_trying,
            # nats-py tries a server until it has failed more than this many times, and forever for 0 or less: a
            # one-off connection gets two quick tries, bounded again below.
            max_reconnect_attempts=-1 if keep_trying else 1,
            reconnect_time_wait=RECONNECT_WAIT_S if keep_trying else ONE_OFF_RETRY_S,
            ping_interval=PING_INTERVAL_S,
            max_outstanding_pings=2,
            error_cb=self._error,
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
            **options,
        )
        if keep_trying:
            await connecting
        else:
            await asyncio.wait_for(connecting, ONE_OFF_BOUND_S)
        await self._state("connected")

    async def close(self) -> None:
        if not self.nc.is_closed:
            try:
                await self.nc.close()
            except Exception:  # closing a broken connection: nothing left to save
                pass
