"""Service kind ``glue``: the AWS Glue Data Catalog API over the service's Hive Metastore, in the
AWS JSON 1.1 protocol as Glue speaks it, so that boto3's glue client (``endpoint_url`` at the
service) works unmodified.

One request: ``POST`` (else 405); the body read whole (413, 408) and left for the ``sigv4``
provider, which signs over it; request-side steps (authentication, identity assertion, service
ACL); ``X-Amz-Target: AWSGlue.<Operation>`` picks the operation (:mod:`gateway.glue.operations`,
``UnknownOperationException`` otherwise); the body is the operation's JSON object
(``SerializationException`` otherwise); HMS is called as the effective user; the answer is
``application/x-amz-json-1.1`` with ``x-amzn-RequestId``.

Every refusal is answered in Glue's error shape (``{"__type", "message"}``,
:mod:`gateway.glue.errors`): a refused SigV4 signature as AWS answers it (403
``InvalidSignatureException``, ``UnrecognizedClientException``; 400
``IncompleteSignatureException``), no credentials 401 ``MissingAuthenticationTokenException``
with the topology's challenges (Basic, Negotiate, Bearer clients work as on the Thrift API),
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
from pydantic import BaseModel, ConfigDict, Field

from gateway.cache.reads import MetadataCache
from gateway.cache.session import CacheSession, report as report_cache
from gateway.cache.settings import CacheOptions
from gateway.config import Limits
from gateway.glue import errors
from gateway.glue.errors import CONTENT_TYPE, GlueError
from gateway.glue.operations import Caller, GlueCatalog
from gateway.observability import metrics
from gateway.pipeline.body import read_body
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import (
    BodyTimeout,
    Forbidden,
    MethodNotAllowed,
    TooLarge,
    Unauthenticated,
)
from gateway.pipeline.step import Chain
from gateway.policy import PolicyEngine
from gateway.providers.authentication.sigv4 import REFUSAL, SIGNED_BODY
from gateway.providers.authentication.throttle import Throttled
from gateway.services.base import MetastoreBacked, ServiceContext
from gateway.thrift.schema import ServiceSchema
from gateway.upstream.errors import UpstreamError, UpstreamTimeout
from gateway.upstream.failover import Upstream
from gateway.upstream.metastore import MetastoreClient, TException

log = logging.getLogger(__name__)

#: ``X-Amz-Target``'s prefix for Glue (botocore's ``targetPrefix``).
TARGET_PREFIX = "AWSGlue."
_REQUEST_ID = "x-amzn-RequestId"


class GlueOptions(BaseModel):
    """The ``glue`` kind's ``options:``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The catalog's id (Glue's ``CatalogId``; AWS uses the account id).
    catalog_id: str = Field(default="000000000000", min_length=1, max_length=255)
    #: Principals allowed to call ``GetUnfilteredTableMetadata``.
    trusted_engines: list[str] = Field(default_factory=list)
    #: The metadata cache of this service's HMS reads (:mod:`gateway.cache`), off by default.
    cache: CacheOptions = Field(default_factory=CacheOptions)


class _Refused(Exception):
    """A request ends with ``error`` (a Glue error) and the outcome label ``label``."""

    def __init__(self, error: GlueError, label: str, headers=()):
        super().__init__(error.message)
        self.error, self.label, self.headers = error, label, headers


class GlueService(MetastoreBacked):
    """Serves one ``glue`` service: ``upstream`` its HMS list, ``chain`` its steps, ``policy``
    its catalog policy (None: everything visible)."""

    kind = "glue"
    roles = ("authentication", "identity-assertion", "authorization")
    Options = GlueOptions

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

    async def handle(self, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        """The response to one request and its outcome label. Raises ``MethodNotAllowed``."""
        request, event = exchange.request, exchange.event
        if request.method != hdrs.METH_POST:
            raise MethodNotAllowed("only POST is allowed", {hdrs.ALLOW: hdrs.METH_POST})
        try:
            body = await self._admit(exchange)
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
                raise _Refused(errors.UnknownOperation(f"Unknown operation {operation[:128]!r}"),
                               "bad_request")
            try:
                result = await serve(payload)
            finally:
                self._audit(exchange, catalog)
                if reads is not None:
                    report_cache(request, event, reads)
        except _Refused as refused:
            event.reason = refused.error.message
            response = refused.error.response(event.request_id)
            for name, value in refused.headers:
                response.headers.add(name, value)
            return response, refused.label
        except GlueError as error:
            event.reason = error.message
            label = "exception" if error.status < 500 else "upstream_unavailable"
            if isinstance(error, (errors.InvalidInput, errors.Serialization)):
                label = "bad_request"
            return error.response(event.request_id), label
        except TException as exc:  # HMS's exception, or TApplicationException
            log.warning("%s/%s %s: %s", self.topology, self.path, event.method, exc)
            event.reason = str(exc)
            return errors.InternalService(str(exc)[:1024]).response(event.request_id), "upstream_unavailable"
        except UpstreamError as exc:
            log.warning("%d %s/%s %s: %s", exc.status, self.topology, self.path, event.method, exc)
            event.reason = str(exc)
            if isinstance(exc, UpstreamTimeout):
                return errors.OperationTimeout(str(exc)).response(event.request_id), "upstream_timeout"
            return errors.ServiceUnavailable(str(exc)).response(event.request_id), "upstream_unavailable"
        response = web.Response(body=json.dumps(result, separators=(",", ":")).encode(),
                                content_type=CONTENT_TYPE)
        response.headers[_REQUEST_ID] = event.request_id
        return response, "ok"

    async def _admit(self, exchange: Exchange) -> bytes:
        """The body, read before the request-side steps (SigV4 signs it); those steps' refusals
        become Glue errors."""
        request = exchange.request
        try:
            body = await read_body(request, self.limits)
            request[SIGNED_BODY] = body
            await self.chain.on_request(exchange)
        except Unauthenticated as exc:
            refusal = request.get(REFUSAL)
            if refusal is not None:
                raise _Refused(GlueError.of(refusal.code, refusal.status, refusal.message),
                               "unauthenticated") from None
            raise _Refused(errors.MissingAuthenticationToken("Missing Authentication Token"),
                           "unauthenticated", exc.headers) from None
        except Forbidden as exc:
            raise _Refused(errors.Forbidden(exc.reason), "forbidden") from None
        except Throttled as exc:
            raise _Refused(errors.Throttling("Rate exceeded: too many failed authentications"),
                           "throttled", [(hdrs.RETRY_AFTER, str(exc.retry_after))]) from None
        except TooLarge as exc:
            raise _Refused(errors.RequestTooLarge(exc.reason), "too_large") from None
        except BodyTimeout as exc:
            raise _Refused(errors.RequestTimeout(exc.reason), "bad_request") from None
        return body

    @staticmethod
    def _payload(body: bytes) -> dict:
        try:
            payload = json.loads(body) if body.strip() else {}
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than json can read
            raise _Refused(errors.Serialization("Start of structure or map found where not expected, "
                                                "or the body is not JSON"), "bad_request") from None
        if not isinstance(payload, dict):
            raise _Refused(errors.Serialization("the body must be a JSON object"), "bad_request")
        return payload

    def _audit(self, exchange: Exchange, catalog: GlueCatalog) -> None:
        """The policy's part in the audit line and in ``hms_gateway_policy_decisions``."""
        event = exchange.event
        event.database, event.table = catalog.object
        if catalog.decision is None:
            return
        event.record_policy(catalog.view, catalog.decision)
        for outcome, count in ((catalog.decision, 1), ("hidden", catalog.hidden),
                               ("columns_hidden", catalog.columns_hidden)):
            if count:
                metrics.POLICY_DECISIONS.labels(topology=self.topology, service=self.path,
                                                outcome=outcome).inc(count)
