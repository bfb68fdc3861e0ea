"""uvicorn's h11 protocol with a deadline on request headers.

uvicorn times out an idle keep-alive connection (after a response), but not a connection whose request headers
never finish: one that opens and sends nothing, or a byte at a time, holds a descriptor for ever. Here every
request's headers must arrive whole within HEADER_TIMEOUT_S of the connection opening (or of the previous response
completing); otherwise a connection that sent part of a request is answered 408 and closed, and one that sent
nothing is closed. The body has its own deadline in the edge gate (gate.BODY_TIMEOUT_S).
"""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 10.0  # read when a deadline is armed; loopback delivers a request's headers in microseconds
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

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a request's headers are in (or the connection is done)
            self._cancel_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # starts the next cycle and handles pipelined bytes, if any
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        self._cancel_header_deadline()
        self._header_deadline = self.loop.call_later(HEADER_TIMEOUT_S, self._headers_too_slow)

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
