"""Service kind ``hms-thrift``: the Hive Metastore Thrift RPC over HTTP POST (MS-HMSHTTP).

One request: refuse what is not a POST (405) or is too large (413); the chain's request-side
steps; read the body (408, 413); decode it with the client's protocol, told by its first byte
(400, :mod:`gateway.thrift.codec`); the chain's call-side steps; then the upstream half
(:mod:`gateway.hms_thrift.dispatch`): the upstream call, reply-side steps for the methods that
declared them, the reply in the client's protocol, streamed where no step reads it. The chain's
steps are the roles :attr:`ThriftRpcService.roles` names.
"""

from __future__ import annotations

import difflib
import logging
from functools import cached_property, partial
from typing import Annotated

from aiohttp import hdrs, web
from pydantic import AfterValidator, Field, ValidationInfo

from gateway.cache.reads import MetadataCache
from gateway.cache.settings import CacheOptions
from gateway.client_address import client_address
from gateway.config import Limits
from gateway.hms_thrift.dispatch import ThriftDispatch
from gateway.hms_thrift.exchange import ThriftExchange
from gateway.hms_thrift.step import ThriftChain
from gateway.observability import metrics
from gateway.pipeline.body import check_length, read_body
from gateway.pipeline.outcomes import Answered, MethodNotAllowed, status_of
from gateway.pipeline.step import Chain
from gateway.services.base import MetastoreBacked, ServiceContext
from gateway.settings_model import SettingsModel
from gateway.thrift.codec import detect_codec
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema, load_schema
from gateway.thrift.walk import call_objects
from gateway.upstream.failover import Upstream
from gateway.upstream.metastore import MetastoreClient

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


class ThriftRpcOptions(SettingsModel):
    """``options:`` of an ``hms-thrift`` service. ``methods``: the IDL methods it exposes
    (default :data:`SPEC_METHODS`); the rest are answered UNKNOWN_METHOD (method exposure).
    ``cache``: the metadata cache (:mod:`gateway.cache`), off by default."""

    methods: list[Annotated[str, AfterValidator(_idl_method)]] = Field(
        default_factory=lambda: list(SPEC_METHODS), min_length=1)
    cache: CacheOptions = Field(default_factory=CacheOptions)


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
        #: The chain's call and reply sides (:mod:`gateway.hms_thrift.step`).
        self.calls = ThriftChain(chain)
        self.dispatch = ThriftDispatch(topology, path, upstream, self.calls, schema, cache)
        self.metastore = MetastoreClient(upstream, schema)

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
        exchange.metastore = self.metastore
        event.method = header.name
        event.objects = partial(call_objects, call, self.schema)  # for the audit line, later
        try:
            await self.calls.on_call(exchange)
        except Answered as answer:  # a step answered as HMS would: nothing goes upstream
            event.reason = answer.reason
            reply = codec.encode_reply(answer.reply, self.schema, header.seqid)
            self.dispatch.response_bytes.inc(len(reply))
            return web.Response(body=reply, content_type=codec.content_type), status_of(answer)[1]
        return await self.dispatch.forward(exchange)
