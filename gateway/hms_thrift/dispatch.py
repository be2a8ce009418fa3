"""The upstream half of one ``hms-thrift`` request, once its call is decoded and its call-side
steps have run (:mod:`gateway.hms_thrift.kind` is the request half): the metadata cache, when
on, before and after the upstream call; the call through the service's HMS list; the reply-side
steps for the methods that declared them; the reply in the client's protocol.

A TJSON or binary reply that no step needs streams to the client while it still arrives (TJSON
through the C translator, binary as HMS's own bytes with the client's seqid:
:mod:`gateway.upstream.streaming`); compact replies and those a step reads are read whole.
"""

from __future__ import annotations

import logging
from functools import cached_property

from aiohttp import web
from aiohttp.payload import BytesPayload

from gateway.cache.reads import MetadataCache
from gateway.hms_thrift.exchange import ThriftExchange
from gateway.hms_thrift.reply import ThriftReply
from gateway.hms_thrift.step import ThriftChain
from gateway.observability import metrics
from gateway.thrift.binary import ONEWAY
from gateway.thrift.errors import ProtocolError
from gateway.thrift.hive_methods import is_read_only
from gateway.thrift.reply_translator import binary_passthrough, reply_translator
from gateway.thrift.schema import ServiceSchema
from gateway.thrift.walk import reply_succeeded
from gateway.upstream.errors import UpstreamError, UpstreamTimeout
from gateway.upstream.failover import Upstream
from gateway.upstream.streaming import ClientGone, ReplySink, StreamBroken

log = logging.getLogger(__name__)


def reply_outcome(message: bytes) -> str:
    """``ok`` for a REPLY carrying success (field 0, or a void method's empty result), else
    ``exception`` (a declared exception or a ``TApplicationException``)."""
    return "ok" if reply_succeeded(message) else "exception"


_SLICE = 64 * 1024
#: Client protocols whose replies stream while they arrive (compact is translated whole).
_STREAMED = frozenset({"tjson", "binary"})


class _SlicedBody(BytesPayload):
    """A body handed to the transport in 64 KiB slices: uvloop's TLS layer encrypts each write
    whole into a memory BIO whose buffer keeps its largest size while the connection lives, so a
    large reply written at once would pin about 1.4 times its size per kept-alive connection
    (measured, docs/performance.md, Soak)."""

    async def write(self, writer) -> None:
        view = memoryview(self._value)
        for start in range(0, len(view), _SLICE):
            await writer.write(view[start:start + _SLICE])

    async def write_with_length(self, writer, content_length: int | None) -> None:
        view = memoryview(self._value)[: content_length]
        for start in range(0, len(view), _SLICE):
            await writer.write(view[start:start + _SLICE])


def _response(body: bytes, content_type: str) -> web.Response:
    if len(body) <= _SLICE:
        return web.Response(body=body, content_type=content_type)
    return web.Response(body=_SlicedBody(body, content_type=content_type))


class ThriftDispatch:
    """The upstream half of one ``hms-thrift`` service: ``upstream`` its HMS list, ``calls``
    its chain's call and reply sides (the reply side here), ``cache`` its metadata cache or None."""

    def __init__(self, topology: str, path: str, upstream: Upstream, calls: ThriftChain,
                 schema: ServiceSchema, cache: MetadataCache | None):
        self.topology, self.path = topology, path
        self.upstream, self.calls, self.schema, self.cache = upstream, calls, schema, cache

    @cached_property
    def response_bytes(self):
        """``hms_gateway_response_bytes_total`` of this service."""
        return metrics.child(metrics.RESPONSE_BYTES, self.topology, self.path)

    async def forward(self, exchange: ThriftExchange) -> tuple[web.StreamResponse, str]:
        """The response to one decoded call and its outcome label. Raises ``UpstreamError``
        when HMS fails before any of the reply was sent (the pipeline's 502 or 504)."""
        header, codec, event = exchange.header, exchange.codec, exchange.event
        assert header is not None and codec is not None
        oneway = header.type == ONEWAY  # the codec checked it against the IDL
        reply_steps = self.calls.reply_steps(header.name, exchange)
        read_only = is_read_only(header.name)
        lookup = self.cache.lookup(exchange) if self.cache is not None else None
        # A cached read is read whole (to keep it); a write's reply waits for its invalidation.
        streams = codec.name in _STREAMED and not (oneway or reply_steps) and lookup is None and read_only
        sink = self._sink(exchange) if streams else None
        identity = exchange.identity
        try:
            if lookup is not None and lookup.reply is not None:
                reply = lookup.reply
            else:
                reply = await self.upstream.call(
                    exchange.call, expect_reply=not oneway, identity=identity,
                    read_only=read_only, sink=sink,
                )
                if lookup is not None and reply is not None:
                    self.cache.stored(exchange, lookup, reply)  # type: ignore[union-attr]
        except UpstreamError as exc:
            log.warning("%d %s/%s %s: %s", exc.status, self.topology, self.path, header.name, exc)
            event.reason = str(exc)
            if lookup is not None:
                self.cache.forwarded(exchange, lookup)  # type: ignore[union-attr]
            if sink is not None and sink.response is not None:  # reply partly sent: cut it
                sink.abort()
                return sink.response, ("upstream_timeout" if isinstance(exc, UpstreamTimeout)
                                       else "upstream_unavailable")
            raise
        except (ClientGone, StreamBroken) as exc:
            log.warning("%s/%s %s: reply stream cut: %s", self.topology, self.path, header.name, exc)
            event.reason = str(exc)
            assert sink is not None
            sink.abort()
            return sink.response or web.Response(status=502, text=f"{exc}\n"), "upstream_unavailable"
        if reply is None:
            return web.Response(status=200), "ok"
        if sink is not None and sink.done:  # the pool has sent the whole response
            assert sink.response is not None
            if sink.gone is not None:
                log.warning("%s/%s %s: client went away: %s", self.topology, self.path, header.name, sink.gone)
                sink.abort()
                return sink.response, "upstream_unavailable"
            self.response_bytes.inc(sink.sent)
            return sink.response, reply_outcome(reply)
        try:
            if reply_steps:
                seen = ThriftReply(reply, self.schema)
                await self.calls.on_reply(exchange, seen, reply_steps)
                reply = seen.message
            body = codec.encode_reply(reply, self.schema, header.seqid)
        except ProtocolError as exc:  # HMS's reply, not the client's call, is malformed
            log.warning("502 %s/%s %s: bad upstream reply: %s", self.topology, self.path, header.name, exc.reason)
            return (web.Response(status=502, text=f"upstream sent a malformed reply: {exc.reason}\n"),
                    "upstream_unavailable")
        self.response_bytes.inc(len(body))
        return _response(body, codec.content_type), reply_outcome(reply)

    def _sink(self, exchange: ThriftExchange) -> ReplySink:
        """A sink that streams the reply in the client's protocol, TJSON translated as it
        arrives or binary passed through (:mod:`gateway.upstream.streaming`)."""
        request, seqid = exchange.request, exchange.header.seqid  # type: ignore[union-attr]
        codec = exchange.codec
        assert codec is not None
        if codec.name == "tjson":
            def new_translator(max_bytes: int):
                return reply_translator(self.schema, max_bytes, seqid)
        else:  # binary: HMS's bytes as they arrive, with the client's seqid
            def new_translator(max_bytes: int):
                return binary_passthrough(max_bytes, seqid)
        return ReplySink(request, new_translator, codec.content_type, exchange.response_headers())
