"""The doors' HTTP/1.1 connection: limits enforced while a request's head is still arriving
(docs/doors/common.md#connection-limits).

The ASGI application sees a request only once its head (request line and headers) is complete,
so three limits must live in the connection itself:

- **header read timeout**: a client has ``LAYBY_HTTP_HEADER_TIMEOUT_SECONDS`` from connecting (or
  from the end of its previous request) to finish sending a request's head; otherwise it gets 408
  and the connection closes (a slow client cannot hold connections open forever);
- **query string size**: a request target longer than the body cap (65536 bytes of query) gets the
  doors' 413 ``payload too large``, like an oversized body;
- **header size**: more header fields, or more header bytes, than the limits get 431 as soon as
  the limit is crossed, without buffering the rest.

Every refusal and every malformed request gets the doors' JSON error body and headers, never a
plain-text page.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from layby_contracts.limits import MAX_BODY_BYTES_DEFAULT
from layby_services.door.messages import HEADER_TIMEOUT, HEADERS_TOO_LARGE, MALFORMED, PAYLOAD_TOO_LARGE

_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    413: b"Payload Too Large",
    431: b"Request Header Fields Too Large",
}


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(status: int, message: str) -> bytes:
    """A complete HTTP/1.1 response: the doors' JSON error envelope, then the connection closes."""
    body = msgspec.json.encode({"error": message})
    return b"".join(
        [
            b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status]),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"cache-control: no-store\r\n",
            b"x-content-type-options: nosniff\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
    )


SSE_WRITER = "layby.sse_writer"
"""The scope key of a request's ``DirectBody`` (the stream doors use it)."""


class DirectBody:
    """Writes already chunk-encoded body bytes straight to a streaming response's connection.

    A stream door's shared tail hands one event to thousands of clients; going through each
    response's ASGI ``send`` would wake a task per client per event. For a client whose response
    is waiting for its next frame, with nothing queued and a socket that accepts more, the tail
    writes the event's pre-encoded chunk here instead (docs/doors/stream.md#one-shared-tail).
    ``write`` refuses (False) whenever that would not be what ``send`` does: before the headers
    went out, without chunked encoding, after the end, on a closed connection, or while the
    socket's buffer is over its high-water mark — the caller then queues the frame for the
    response's own ``send``, which waits for the socket."""

    __slots__ = ("_cycle",)

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle

    def write(self, chunk: bytes) -> bool:
        cycle = self._cycle
        try:
            if (
                cycle.disconnected
                or cycle.response_complete
                or not cycle.response_started
                or not cycle.chunked_encoding
                or cycle.flow.write_paused
                or cycle.transport.is_closing()
            ):
                return False
        except AttributeError:
            return False  # a server release that keeps its state otherwise: ASGI's send, as before
        cycle.transport.write(chunk)
        return True

    def abort(self) -> None:
        """Drop the connection (a client that does not even take its last frame)."""
        self._cycle.transport.abort()


class Limits(msgspec.Struct, frozen=True):
    header_timeout: float = 10.0
    max_headers: int = 100
    max_header_bytes: int = 16384
    max_query_bytes: int = MAX_BODY_BYTES_DEFAULT


def protocol_with(limits: Limits) -> type[HttpToolsProtocol]:
    """The connection class for uvicorn's ``http=`` setting, bound to ``limits``."""

    class DoorProtocol(HttpToolsProtocol):
        _limits = limits

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._refusal: _Refused | None = None
            self._header_count = 0
            self._header_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            self._disarm_head_timer()
            self._head_timer = self.loop.call_later(self._limits.header_timeout, self._head_timed_out)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.write(error_response(408, HEADER_TIMEOUT))
                self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._header_count = self._header_bytes = 0
            if self._head_timer is None:
                self._arm_head_timer()  # the next request on a kept-alive connection

        def on_url(self, url: bytes) -> None:
            super().on_url(url)
            _, _, query = self.url.partition(b"?")
            if len(query) > self._limits.max_query_bytes:
                self._refuse(413, PAYLOAD_TOO_LARGE)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._header_count += 1
            self._header_bytes += len(name) + len(value)
            if (
                self._header_count > self._limits.max_headers
                or self._header_bytes > self._limits.max_header_bytes
            ):
                self._refuse(431, HEADERS_TOO_LARGE)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._disarm_head_timer()
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and cycle.scope is self.scope:
                self.scope[SSE_WRITER] = DirectBody(cycle)  # type: ignore[literal-required]

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self._head_timer is None:
                self._arm_head_timer()

        def _refuse(self, status: int, message: str) -> None:
            self._refusal = _Refused(status, message)
            raise self._refusal  # stops the parser; send_400_response answers with it

        def send_400_response(self, msg: str) -> None:
            refusal, self._refusal = self._refusal, None
            self._disarm_head_timer()
            if refusal is None:
                refusal = _Refused(400, MALFORMED)
            self.transport.write(error_response(refusal.status, refusal.message))
            self.transport.close()

    return DoorProtocol
