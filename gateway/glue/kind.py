"""Service kind ``glue``: the AWS Glue Data Catalog API over the service's Hive Metastore, in the
AWS JSON 1.1 protocol as Glue speaks it, so that boto3's glue client (``endpoint_url`` at the
service) works unmodified.

One request, through the HTTP frame (:mod:`gateway.services.http_frame`, with
:class:`~gateway.glue.errors.GlueErrors` as its error model): ``POST`` (else 405); the body read whole (413, 408) and left for the ``sigv4``
provider, which signs over it; request-side steps (authentication, identity assertion, service
ACL); ``X-Amz-Target: AWSGlue.<Operation>`` picks the operation (:mod:`gateway.glue.operations`,
``UnknownOperationException`` otherwise); the body is the operation's JSON object
(``SerializationException`` otherwise); HMS is called as the effective user; the answer is
``application/x-amz-json-1.1`` with ``x-amzn-RequestId``.

Every refusal is answered in Glue's error shape (``{"__type", "message"}``,
:mod:`gateway.glue.errors`): a refused SigV4 signature as AWS answers it (403
``InvalidSignatureException``, ``UnrecognizedClientException``; 400
``IncompleteSignatureException``), no credentials 401 ``MissingAuthenticationTokenException``
with the topology's challenges, whose message names the schemes it accepts (a SigV4 signature
on a topology without a ``sigv4`` provider is said to be one; Basic, Negotiate, Bearer clients
work as on the Thrift API),
identity assertion or ACL 403 ``AccessDeniedException``, the failure throttle 429
``ThrottlingException``, HMS unreachable 503 ``ServiceUnavailableException``.

Options (``options:`` of the service entry): ``catalog_id``, the id the catalog answers to
(``CatalogId``); ``trusted_engines``, the principals (a ``doAs`` impersonator, else the
effective user) that may call ``GetUnfilteredTableMetadata``, whose answer holds columns the user
may not read, for engines that enforce ``AuthorizedColumns`` themselves.
"""

from __future__ import annotations

import json
import logging

from aiohttp import hdrs, web
from pydantic import Field

from gateway.cache.reads import MetadataCache
from gateway.cache.session import CacheSession, report as report_cache
from gateway.cache.settings import CacheOptions
from gateway.config import Limits
from gateway.glue import errors
from gateway.glue.errors import CONTENT_TYPE, GlueError, GlueErrors
from gateway.glue.operations import Caller, GlueCatalog
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import MethodNotAllowed
from gateway.pipeline.step import Chain
from gateway.policy import PolicyEngine
from gateway.services.base import ServiceContext
from gateway.services.http_frame import HttpKind
from gateway.settings_model import SettingsModel
from gateway.thrift.schema import ServiceSchema
from gateway.upstream.failover import Upstream
from gateway.upstream.metastore import MetastoreClient

log = logging.getLogger(__name__)

#: ``X-Amz-Target``'s prefix for Glue (botocore's ``targetPrefix``).
TARGET_PREFIX = "AWSGlue."
_REQUEST_ID = "x-amzn-RequestId"


class GlueOptions(SettingsModel):
    """The ``glue`` kind's ``options:``."""

    #: The catalog's id (Glue's ``CatalogId``; AWS uses the account id).
    catalog_id: str = Field(default="000000000000", min_length=1, max_length=255)
    #: Principals allowed to call ``GetUnfilteredTableMetadata``.
    trusted_engines: list[str] = Field(default_factory=list)
    #: The metadata cache of this service's HMS reads (:mod:`gateway.cache`), off by default.
    cache: CacheOptions = Field(default_factory=CacheOptions)


class GlueService(HttpKind):
    """Serves one ``glue`` service: ``upstream`` its HMS list, ``chain`` its steps, ``policy``
    its catalog policy (None: everything visible)."""

    kind = "glue"
    roles = ("authentication", "identity-assertion", "authorization")
    Options = GlueOptions
    errors = GlueErrors()

    def __init__(self, topology: str, path: str, upstream: Upstream, chain: Chain,
                 schema: ServiceSchema, policy: PolicyEngine | None, limits: Limits,
                 options: GlueOptions, cache: MetadataCache | None = None):
        self.topology, self.path = topology, path
        self.cache = cache
        self.upstream, self.chain, self.schema, self.policy = upstream, chain, schema, policy
        self.limits = limits
        self.catalog_id = options.catalog_id
        self.trusted_engines = frozenset(options.trusted_engines)

    @classmethod
    def build(cls, ctx: ServiceContext) -> GlueService:
        """The handler of one ``glue`` service. Raises ``ConfigError`` without ``upstream``."""
        options = ctx.options or GlueOptions()
        return cls(ctx.topology, ctx.config.path, ctx.upstream(), ctx.chain, ctx.schema,
                   ctx.policy, ctx.gateway.limits, options, ctx.metadata_cache(options.cache))

    def screen(self, request: web.BaseRequest) -> None:
        """Raises ``MethodNotAllowed`` (the pipeline's 405) for a method other than ``POST``."""
        if request.method != hdrs.METH_POST:
            raise MethodNotAllowed("only POST is allowed", {hdrs.ALLOW: hdrs.METH_POST})

    async def serve(self, exchange: Exchange, target: None, body: bytes) -> tuple[web.StreamResponse, str]:
        """The operation ``X-Amz-Target`` names, on the body's JSON object. Raises
        :class:`GlueError` (``UnknownOperationException``, ``SerializationException``...)."""
        request, event = exchange.request, exchange.event
        operation = request.headers.get("X-Amz-Target", "")
        event.method = operation[len(TARGET_PREFIX):] if operation.startswith(TARGET_PREFIX) else None
        payload = self._payload(body)
        identity = exchange.identity
        assert identity is not None  # the identity step ran
        engine = identity.impersonator or identity.user
        # every Glue operation only reads, so each may read through the cache
        reads = CacheSession(self.cache) if self.cache is not None else None
        catalog = GlueCatalog(MetastoreClient(self.upstream, self.schema, identity=identity, reads=reads),
                              Caller(identity.user, identity.groups, engine),
                              self.policy, self.catalog_id, self.trusted_engines)
        serve = catalog.operation(event.method) if event.method else None
        if serve is None:
            raise errors.UnknownOperation(f"Unknown operation {operation[:128]!r}")
        try:
            result = await serve(payload)
        finally:
            event.database, event.table = catalog.object
            self.record_policy(event, catalog.view, catalog.decision)
            if reads is not None:
                report_cache(request, event, reads)
        response = web.Response(body=json.dumps(result, separators=(",", ":")).encode(),
                                content_type=CONTENT_TYPE)
        response.headers[_REQUEST_ID] = event.request_id
        return response, "ok"

    @staticmethod
    def _payload(body: bytes) -> dict:
        try:
            payload = json.loads(body) if body.strip() else {}
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than json can read
            raise errors.Serialization("Start of structure or map found where not expected, "
                                       "or the body is not JSON") from None
        if not isinstance(payload, dict):
            raise errors.Serialization("the body must be a JSON object")
        return payload
