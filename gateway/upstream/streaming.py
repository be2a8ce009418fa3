"""Streaming a large upstream reply to the HTTP client while it is still arriving.

The dispatch puts a :class:`ReplySink` in a context variable for the one binary request it
sends (:func:`expecting`); the TCP pool, when it sends exactly that request object, feeds the
reply's socket chunks to the sink instead of collecting them (other messages on the same task,
``set_ugi`` or HA probes, are not affected). The sink translates each chunk (C translator:
TJSON comes out as values complete) and writes the output as a chunked HTTP response once
``flush_bytes`` are waiting, so the gateway's memory for one reply stays bounded by a constant
plus the largest single string. A reply that ends before ``flush_bytes`` of output is sent as
an ordinary response with ``Content-Length``.

Errors: before the first byte goes out, an upstream error is still a plain-text 502/504 and a
failover retry starts a fresh translation; after it, the dispatch aborts the client connection
(an incomplete chunked body, never a complete-looking truncated one). A client that goes away
raises :class:`ClientGone`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

from aiohttp import web

__all__ = ["ReplySink", "ClientGone", "StreamBroken", "expecting", "sink_for"]

HEAD_BYTES = 8192  # reply bytes kept for reading its header and first field (name ≤ 4096)

_current: contextvars.ContextVar["ReplySink | None"] = contextvars.ContextVar("reply_sink", default=None)


class ClientGone(Exception):
    """The HTTP client closed its connection while the reply was being streamed."""


class StreamBroken(Exception):
    """A retry was attempted after part of the reply had already been sent."""


class ReplySink:
    """Where the pool feeds the raw reply of ``call`` (see the module docstring).

    ``new_translator(max_bytes)`` returns a fresh translator (``feed``/``take``/``pending``,
    see :mod:`gateway.thrift.streaming`); ``prepare(response)`` adds headers before sending.
    """

    def __init__(
        self,
        call: bytes,
        request: web.Request,
        new_translator: Callable[[int], object],
        content_type: str,
        prepare: Callable[[web.StreamResponse], None],
        flush_bytes: int = 64 * 1024,
    ):
        self.call = call
        self._request = request
        self._new_translator = new_translator
        self._content_type = content_type
        self._prepare = prepare
        self.flush_bytes = flush_bytes
        self.response: web.StreamResponse | None = None
        self.head = b""
        self.done = False
        self.sent = 0
        self._translator = None

    @property
    def started(self) -> bool:
        """True once response bytes went to the client."""
        return self.response is not None

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

    async def finish(self) -> web.StreamResponse:
        """The response for a complete reply: the streamed one, ended, or a plain one."""
        rest = self._translator.take()  # type: ignore[union-attr]
        if self.response is None:
            self.sent = len(rest)
            return web.Response(body=rest, content_type=self._content_type)
        await self._write(rest)
        try:
            await self.response.write_eof()
        except ConnectionError as exc:
            raise ClientGone(str(exc)) from None
        return self.response

    async def _write(self, data: bytes) -> None:
        try:
            if self.response is None:
                response = web.StreamResponse(status=200)
                response.content_type = self._content_type
                self._prepare(response)
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


@contextlib.contextmanager
def expecting(sink: ReplySink | None) -> Iterator[None]:
    """Within the block, the pool streams the reply to ``sink.call`` into ``sink``."""
    token = _current.set(sink)
    try:
        yield
    finally:
        _current.reset(token)


def sink_for(request: bytes) -> ReplySink | None:
    """The sink waiting for the reply to exactly this request object, if any."""
    sink = _current.get()
    return sink if sink is not None and sink.call is request else None
