"""Streaming a large upstream reply to the HTTP client while it is still arriving.

The dispatch hands a :class:`ReplySink` to the upstream call (``sink=``); the TCP pool feeds
the reply's socket chunks to it instead of collecting them, once the reply's header shows that
it answers the call (an upstream that returns whole replies, such as Hive 4's HTTP mode, leaves
the sink unused and the dispatch encodes the whole reply). The sink translates each chunk (C translator:
TJSON comes out as values complete) and writes the output as a chunked HTTP response once
``flush_bytes`` are waiting, so the gateway's memory for one reply stays bounded by a constant
plus the largest single string. A reply that ends before ``flush_bytes`` of output is sent as
an ordinary response with ``Content-Length``. The pool completes the response (:meth:`ReplySink.complete`)
as soon as the reply's last byte is translated, before it returns the connection to the pool
and counts the call: the client does not wait for that bookkeeping.

Errors: before the first byte goes out, an upstream error is still a plain-text 502/504 and a
failover retry starts a fresh translation; after it, the dispatch aborts the client connection
(an incomplete chunked body, never a complete-looking truncated one). A client that goes away
raises :class:`ClientGone`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiohttp import web

__all__ = ["ReplySink", "ClientGone", "StreamBroken"]

HEAD_BYTES = 8192  # reply bytes kept for reading its header and first field (name ≤ 4096)


class ClientGone(Exception):
    """The HTTP client closed its connection while the reply was being streamed."""


class StreamBroken(Exception):
    """A retry was attempted after part of the reply had already been sent."""


class ReplySink:
    """Where the pool feeds the raw reply of one call (see the module docstring).

    ``new_translator(max_bytes)`` returns a fresh translator (``feed``/``take``/``pending``,
    see :mod:`gateway.thrift.reply_translator`); ``headers`` go with the response, whichever
    form it takes.
    """

    def __init__(
        self,
        request: web.BaseRequest,
        new_translator: Callable[[int], object],
        content_type: str,
        headers: Mapping[str, str] | None = None,
        flush_bytes: int = 64 * 1024,
    ):
        self._request = request
        self._new_translator = new_translator
        self._content_type = content_type
        self._headers = headers or {}
        self.flush_bytes = flush_bytes
        self.response: web.StreamResponse | None = None
        self.head = b""
        self.done = False
        self.sent = 0
        #: Set by :meth:`complete` when the client went away while the response was completed.
        self.gone: ClientGone | None = None
        self._translator = None

    def begin(self, max_bytes: int) -> None:
        """Start (or restart, for a failover retry) reading one reply."""
        if self.response is not None:
            raise StreamBroken("upstream failed after part of the reply was sent")
        self._translator = self._new_translator(max_bytes)
        self.head = b""
        self.done = False

    def feed(self, chunk: bytes) -> int | None:
        """Translate one chunk; the reply's length once complete. Raises ``ProtocolError``."""
        if len(self.head) < HEAD_BYTES:
            self.head += chunk[: HEAD_BYTES - len(self.head)]
        end = self._translator.feed(chunk)  # type: ignore[union-attr]
        if end is not None:
            self.done = True
        return end

    async def flush(self) -> None:
        """Send the output waiting, if there is enough of it (the rest goes in :meth:`finish`)."""
        if not self.done and self._translator.pending >= self.flush_bytes:  # type: ignore[union-attr]
            await self._write(self._translator.take())  # type: ignore[union-attr]

    async def complete(self) -> None:
        """Send the rest of a complete reply and end the response: the streamed one, or a plain
        one with ``Content-Length`` (:attr:`response` either way). A client that went away
        meanwhile is recorded in :attr:`gone`, not raised: the reply was read whole, so the
        upstream connection stays good."""
        rest = self._translator.take()  # type: ignore[union-attr]
        try:
            if self.response is None:
                response = self.response = web.Response(body=rest, content_type=self._content_type,
                                                        headers=self._headers)
                await response.prepare(self._request)
                self.sent = len(rest)
            else:
                await self._write(rest)
            await self.response.write_eof()
        except ConnectionError as exc:
            self.gone = ClientGone(str(exc) or type(exc).__name__)
        except ClientGone as exc:
            self.gone = exc

    async def _write(self, data: bytes) -> None:
        try:
            if self.response is None:
                response = web.StreamResponse(status=200, headers=self._headers)
                response.content_type = self._content_type
                self.response = response
                await response.prepare(self._request)
            await self.response.write(data)
        except ConnectionError as exc:  # aiohttp's ClientConnectionResetError is one
            raise ClientGone(str(exc) or type(exc).__name__) from None
        self.sent += len(data)

    def abort(self) -> None:
        """Cut the client connection mid-body, so the client sees an incomplete reply."""
        transport = self._request.transport
        if transport is not None:
            transport.abort()
