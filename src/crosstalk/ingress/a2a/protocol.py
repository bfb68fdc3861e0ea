"""uvicorn's h11 protocol with a deadline on request headers and a cap on open connections.

uvicorn times out an idle keep-alive connection (after a response), but not a connection whose request headers
never finish: one that opens and sends nothing, or a byte at a time, holds a descriptor for ever. Here a new
connection's first request headers must arrive whole within HEADER_TIMEOUT_S of it opening, and a later request's
within HEADER_TIMEOUT_S of its first bytes; otherwise a connection that sent part of a request is answered 408 and
closed, and one that sent nothing is closed. The body has its own deadline in the edge gate (gate.BODY_TIMEOUT_S).

An idle keep-alive connection (after a response, nothing of the next request yet) is closed after KEEP_ALIVE_S
(uvicorn's own keep-alive timeout is set to it too), well past the A2AClient's reuse window
(client.KEEPALIVE_EXPIRY_S), so a connection a client picks from its pool is never one the agent is closing under
it, even when the client stalls between pick and write. Both are long enough that agents talking seconds apart
keep one warm connection: no TCP handshake and connection set-up per message (docs/performance.md, own part).

Past MAX_CONNECTIONS open connections, a new one is answered 503 (busy) and closed at once, so idle connections
cannot take every descriptor the process has (its journal, its socket ingress) and each refusal is one line in
the log at most once a minute, never a traceback per connection.
"""

from __future__ import annotations

import asyncio
import logging
import time

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 10.0  # read when a deadline is armed; loopback delivers a request's headers in microseconds
KEEP_ALIVE_S = 75.0  # an idle connection's life after a response; read when that deadline is armed
MAX_CONNECTIONS = 512  # open at once, per agent; read at each connection (the socket ingress allows 256)
BUSY_WARN_EVERY_S = 60.0
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"retry-after: 1\r\n"
    b"content-length: 55\r\n\r\n"
    b"busy: too many connections open to this agent; retry.\r\n"
)
_REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"content-length: 41\r\n\r\n"
    b"request headers did not arrive in time.\r\n"
)


class HeaderDeadlineProtocol(H11Protocol):
    """H11Protocol whose request headers have a deadline (see the module docstring)."""

    _header_deadline: asyncio.TimerHandle | None = None
    _idle_deadline = False  # the armed deadline is the idle one (KEEP_ALIVE_S), not a request's headers'
    _busy_warned_at = float("-inf")  # class-wide: one warning per BUSY_WARN_EVERY_S across connections

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > MAX_CONNECTIONS:  # this one is counted already
            now = time.monotonic()
            if now - HeaderDeadlineProtocol._busy_warned_at >= BUSY_WARN_EVERY_S:
                HeaderDeadlineProtocol._busy_warned_at = now
                log.warning("A2A: %d connections open; refusing more (busy) for now", MAX_CONNECTIONS)
            transport.write(_BUSY)
            transport.close()
            return
        self._arm_header_deadline()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a request's headers are in (or the connection is done)
            self._cancel_header_deadline()
        elif self._idle_deadline and self.conn.trailing_data[0]:  # an idle connection began a request
            self._arm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # starts the next cycle and handles pipelined bytes, if any
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_deadline(idle=not self.conn.trailing_data[0])

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        super().connection_lost(exc)

    def _arm_header_deadline(self, *, idle: bool = False) -> None:
        self._cancel_header_deadline()
        self._idle_deadline = idle
        self._header_deadline = self.loop.call_later(KEEP_ALIVE_S if idle else HEADER_TIMEOUT_S, self._headers_too_slow)

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        if self.conn.trailing_data[0]:  # part of a request is buffered: answer it before closing
            log.info("A2A: request headers from %s did not arrive within %.0f s; closed", self.client, HEADER_TIMEOUT_S)
            self.transport.write(_REQUEST_TIMEOUT)
        self.transport.close()
