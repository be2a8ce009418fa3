"""Service kind ``hms-thrift``: the Hive Metastore Thrift RPC over HTTP POST (MS-HMSHTTP).

One request: refuse what is not a POST (405) or is too large (413); the chain's request-side
steps; read the body (408, 413); decode it with the client's protocol, told by its first byte
(400, :mod:`gateway.thrift.codec`); the chain's call-side steps; the upstream call; reply-side
steps for the methods that declared them; encode the reply in the client's protocol. The chain's
steps are the roles :attr:`ThriftRpcService.roles` names.

A TJSON or binary reply that no step needs streams to the client while it still arrives (TJSON
through the C translator, binary as HMS's own bytes with the client's seqid:
:mod:`gateway.upstream.streaming`); compact replies and those a step reads are read whole.
"""

from __future__ import annotations

import difflib
import logging
from functools import cached_property, partial
from typing import Annotated

from aiohttp import hdrs, web
from aiohttp.payload import BytesPayload
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo

from gateway.cache.reads import MetadataCache
from gateway.cache.settings import CacheOptions
from gateway.client_address import client_address
from gateway.config import Limits
from gateway.observability import metrics
from gateway.pipeline.body import check_length, read_body
from gateway.hms_thrift.exchange import ThriftExchange
from gateway.pipeline.outcomes import Answered, MethodNotAllowed, status_of
from gateway.hms_thrift.reply import ThriftReply
from gateway.pipeline.step import Chain
from gateway.services.base import MetastoreBacked, ServiceContext
from gateway.thrift.binary import ONEWAY
from gateway.thrift.codec import detect_codec
from gateway.thrift.errors import ProtocolError
from gateway.thrift.reply_translator import binary_passthrough, reply_translator
from gateway.thrift.schema import ServiceSchema, load_schema
from gateway.thrift.walk import call_objects, reply_succeeded
from gateway.upstream.errors import UpstreamError, UpstreamTimeout
from gateway.thrift.hive_methods import is_read_only
from gateway.upstream.failover import Upstream
from gateway.upstream.streaming import ClientGone, ReplySink, StreamBroken

log = logging.getLogger(__name__)

#: The nine read methods of MS-HMSHTTP section 3.1.5, exposed when a service lists none.
SPEC_METHODS: tuple[str, ...] = (
    "get_all_databases",
    "get_databases",
    "get_database",
    "get_all_tables",
    "get_tables",
    "get_table",
    "get_tables_by_type",
    "get_partition_names",
    "get_partitions",
)


def _idl_method(name: str, info: ValidationInfo) -> str:
    """``name`` when the IDL (validation context ``schema``, default the bundled one) has that
    method; else ``ValueError`` suggesting the closest name (a misspelling would otherwise
    leave the method unexposed without a word)."""
    schema: ServiceSchema = (info.context or {}).get("schema") or load_schema()
    if name not in schema.methods:
        close = difflib.get_close_matches(name, schema.methods, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"{name!r} is not a method of the IDL{hint}")
    return name


class ThriftRpcOptions(BaseModel):
    """``options:`` of an ``hms-thrift`` service. ``methods``: the IDL methods it exposes
    (default :data:`SPEC_METHODS`); the rest are answered UNKNOWN_METHOD (method exposure).
    ``cache``: the metadata cache (:mod:`gateway.cache`), off by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    methods: list[Annotated[str, AfterValidator(_idl_method)]] = Field(
        default_factory=lambda: list(SPEC_METHODS), min_length=1)
    cache: CacheOptions = Field(default_factory=CacheOptions)


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


class ThriftRpcService(MetastoreBacked):
    """Serves one ``hms-thrift`` service: ``upstream`` its HMS list, ``chain`` its steps."""

    kind = "hms-thrift"
    roles = ("authentication", "identity-assertion", "authorization", "method-exposure",
             "ugi-claim", "catalog-policy", "ownership-assertion")
    Options = ThriftRpcOptions
    #: Its requests carry the Thrift call (the gateway handler builds this type).
    exchange_type = ThriftExchange

    def __init__(self, topology: str, path: str, upstream: Upstream, chain: Chain,
                 schema: ServiceSchema, limits: Limits, cache: MetadataCache | None = None):
        self.topology, self.path = topology, path
        self.upstream, self.chain, self.schema = upstream, chain, schema
        self.limits = limits
        self.cache = cache

    @classmethod
    def build(cls, ctx: ServiceContext) -> "ThriftRpcService":
        """The handler of one ``hms-thrift`` service. Raises ``ConfigError`` without ``upstream``."""
        upstream = ctx.upstream()
        options = ctx.options or ThriftRpcOptions()
        return cls(ctx.topology, ctx.config.path, upstream, ctx.chain, ctx.schema,
                   ctx.gateway.limits, ctx.metadata_cache(options.cache))

    @cached_property
    def _request_bytes(self):
        return metrics.child(metrics.REQUEST_BYTES, self.topology, self.path)

    @cached_property
    def _response_bytes(self):
        return metrics.child(metrics.RESPONSE_BYTES, self.topology, self.path)

    async def handle(self, exchange: ThriftExchange) -> tuple[web.StreamResponse, str]:
        """The response to one request and its outcome label. Raises pipeline outcomes."""
        request = exchange.request
        if request.method != hdrs.METH_POST:
            raise MethodNotAllowed("only POST is allowed", {hdrs.ALLOW: hdrs.METH_POST})
        check_length(request, self.limits)
        await self.chain.on_request(exchange)
        body = await read_body(request, self.limits)
        try:
            return await self._serve_call(exchange, body)
        finally:
            self._request_bytes.inc(len(body))  # counted off the request's path

    async def _serve_call(self, exchange: ThriftExchange, body: bytes) -> tuple[web.StreamResponse, str]:
        request, event = exchange.request, exchange.event
        try:
            codec = detect_codec(body, request.content_type)
            header, call = codec.decode_call(body, self.schema)
        except ProtocolError as exc:
            log.info("400 %s/%s from %s: %s", self.topology, self.path, client_address(request), exc.reason)
            event.reason = exc.reason
            raise
        exchange.codec, exchange.header, exchange.call = codec, header, call
        event.method = header.name
        event.objects = partial(call_objects, call, self.schema)  # for the audit line, later
        try:
            await self.chain.on_call(exchange)
        except Answered as answer:  # a step answered as HMS would: nothing goes upstream
            event.reason = answer.reason
            reply = codec.encode_reply(answer.reply, self.schema, header.seqid)
            self._response_bytes.inc(len(reply))
            return web.Response(body=reply, content_type=codec.content_type), status_of(answer)[1]
        return await self._dispatch(exchange)

    async def _dispatch(self, exchange: ThriftExchange) -> tuple[web.StreamResponse, str]:
        header, codec, event = exchange.header, exchange.codec, exchange.event
        assert header is not None and codec is not None
        oneway = header.type == ONEWAY  # the codec checked it against the IDL
        reply_steps = self.chain.reply_steps(header.name, exchange)
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
            self._response_bytes.inc(sink.sent)
            return sink.response, reply_outcome(reply)
        try:
            if reply_steps:
                seen = ThriftReply(reply, self.schema)
                await self.chain.on_reply(exchange, seen, reply_steps)
                reply = seen.message
            body = codec.encode_reply(reply, self.schema, header.seqid)
        except ProtocolError as exc:  # HMS's reply, not the client's call, is malformed
            log.warning("502 %s/%s %s: bad upstream reply: %s", self.topology, self.path, header.name, exc.reason)
            return (web.Response(status=502, text=f"upstream sent a malformed reply: {exc.reason}\n"),
                    "upstream_unavailable")
        self._response_bytes.inc(len(body))
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

