"""Service kind ``iceberg-rest``: the Iceberg REST Catalog API (apache/iceberg
``open-api/rest-catalog-open-api.yaml``) over the service's Hive Metastore, at
``/gateway/{topology}/{service path}/v1/...`` (:mod:`gateway.iceberg`).

One request: the body read whole (413, 408); the request-side steps (authentication, identity
assertion, service ACL); the path below the service picks the operation
(:mod:`gateway.iceberg.routes`: 404 for a path the API lacks, 405 with ``Allow``); HMS is called
as the effective user (``set_ugi``); the catalog policy decides what the user sees (404) and may
do (403). Every refusal is the spec's error model ``{"error": {"message", "type", "code"}}``:
401 ``NotAuthorizedException`` with the topology's challenges, 403 ``ForbiddenException``, 429
with ``Retry-After`` from the failure throttle, 503 ``ServiceUnavailableException`` when HMS is
unreachable, 502 ``ServiceFailureException`` when it fails otherwise (never a 500: 500, 502 and
504 on a commit mean "commit state unknown" to clients, and a commit answers them only then).

Options (``options:`` of the service entry): ``hive2_compatible`` (Hive 2 column types in the
HMS copy of the schema, default true), ``lock_wait_seconds`` (a commit's wait for HMS's table
lock before 409, default 60), ``lock_check_min_wait_seconds``/``lock_check_max_wait_seconds``
(``check_lock`` back-off, 0.05 and 5), ``file_io`` (PyIceberg FileIO properties for the
metadata files, such as ``s3.endpoint``; values are never logged).
"""

from __future__ import annotations

import json
import logging
import socket
from urllib.parse import urlsplit

from aiohttp import hdrs, web
from pydantic import BaseModel, ConfigDict, Field, model_validator
from thriftpy2.thrift import TException

from gateway.config import Limits
from gateway.iceberg import commit, errors, namespaces, tables
from gateway.iceberg.catalog import Catalog, Reply, Settings
from gateway.iceberg.errors import IcebergError
from gateway.iceberg.files import MetadataFiles
from gateway.iceberg.routes import ENDPOINTS, Route, match
from gateway.pipeline.body import read_body
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import BodyTimeout, Forbidden, TooLarge, Unauthenticated
from gateway.pipeline.step import Chain
from gateway.policy import PolicyEngine
from gateway.policy.view import CatalogView
from gateway.providers.authentication.throttle import Throttled
from gateway.services.base import ServiceContext
from gateway.thrift.schema import ServiceSchema
from gateway.upstream.errors import UpstreamError
from gateway.upstream.failover import Upstream
from gateway.upstream.metastore import MetastoreClient

log = logging.getLogger(__name__)


class IcebergRestOptions(BaseModel):
    """The ``iceberg-rest`` kind's ``options:``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hive2_compatible: bool = True
    lock_wait_seconds: float = Field(default=60.0, gt=0, le=3600)
    lock_check_min_wait_seconds: float = Field(default=0.05, gt=0, le=60)
    lock_check_max_wait_seconds: float = Field(default=5.0, gt=0, le=60)
    file_io: dict[str, str] = Field(default_factory=dict, repr=False)

    @model_validator(mode="after")
    def _back_off(self) -> "IcebergRestOptions":
        if self.lock_check_max_wait_seconds < self.lock_check_min_wait_seconds:
            raise ValueError("lock_check_max_wait_seconds must not be below lock_check_min_wait_seconds")
        return self


class IcebergRestService:
    """Serves one ``iceberg-rest`` service: ``upstream`` its HMS list, ``chain`` its steps,
    ``policy`` its catalog policy (None: everything visible)."""

    kind = "iceberg-rest"
    roles = ("authentication", "identity-assertion", "authorization")
    Options = IcebergRestOptions
    #: The router hands this kind the paths below its own (``.../v1/...``).
    serves_subpaths = True

    def __init__(self, topology: str, path: str, upstream: Upstream, chain: Chain,
                 schema: ServiceSchema, policy: PolicyEngine | None, limits: Limits,
                 options: IcebergRestOptions):
        self.topology, self.path = topology, path
        self.upstream, self.chain, self.schema, self.policy = upstream, chain, schema, policy
        self.limits = limits
        self.prefix = f"/gateway/{topology}/{path}"
        self.files = MetadataFiles(options.file_io)
        self.settings = Settings(
            hive2_compatible=options.hive2_compatible, lock_wait=options.lock_wait_seconds,
            lock_check_min_wait=options.lock_check_min_wait_seconds,
            lock_check_max_wait=options.lock_check_max_wait_seconds,
            hostname=socket.gethostname(),
        )

    @classmethod
    def build(cls, ctx: ServiceContext) -> IcebergRestService:
        """The handler of one ``iceberg-rest`` service. Raises ``ConfigError`` without ``upstream``."""
        return cls(ctx.topology, ctx.config.path, ctx.upstream(), ctx.chain, ctx.schema,
                   ctx.policy, ctx.gateway.limits, ctx.options or IcebergRestOptions())

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        await self.upstream.close()

    async def handle(self, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        """The response to one request and its outcome label (errors in the spec's model)."""
        request, event = exchange.request, exchange.event
        head = request.method == hdrs.METH_HEAD
        try:
            body = await self._admit(exchange)
            route = match(request.method, self._subpath(request))
            event.method = route.operation
            event.database, event.table = route.namespace, route.table
            identity = exchange.identity
            assert identity is not None  # the identity step ran
            catalog = Catalog(MetastoreClient(self.upstream, self.schema, identity=identity),
                              CatalogView(self.policy, identity.user, identity.groups),
                              self.files, self.settings, identity.user)
            try:
                reply = await self._dispatch(route, catalog, request, body)
            finally:
                if catalog.objects != (None, None):
                    event.database, event.table = catalog.objects
        except IcebergError as error:
            event.reason = error.message
            return error.response(head), _label(error)
        except UpstreamError as exc:
            log.warning("%d %s/%s %s: %s", exc.status, self.topology, self.path, event.method, exc)
            event.reason = str(exc)
            error = errors.ServiceUnavailable(f"the Hive Metastore is unavailable: {exc}")
            return error.response(head), "upstream_unavailable"
        except TException as exc:  # an HMS exception no operation expects, or TApplicationException
            log.warning("%s/%s %s: HMS failed: %r", self.topology, self.path, event.method, exc)
            event.reason = f"HMS failed: {exc!r}"[:1024]
            error = errors.ServiceFailure(f"the Hive Metastore failed: {type(exc).__name__}: "
                                          f"{getattr(exc, 'message', None) or exc}")
            return error.response(head), "upstream_unavailable"
        except OSError as exc:  # storage of the metadata files
            log.warning("%s/%s %s: storage failed: %s", self.topology, self.path, event.method, exc)
            event.reason = f"storage failed: {exc}"[:1024]
            return errors.ServiceFailure(f"storage failed: {exc}").response(head), "upstream_unavailable"
        return self._response(reply, head), "ok"

    async def _dispatch(self, route: Route, catalog: Catalog, request: web.BaseRequest, body: bytes) -> Reply:
        db, table, query = route.namespace, route.table, request.query
        match route.operation:
            case "getConfig":
                return Reply(body={"defaults": {}, "overrides": {}, "endpoints": list(ENDPOINTS)})
            case "listNamespaces":
                return await namespaces.list_namespaces(catalog, query)
            case "createNamespace":
                return await namespaces.create_namespace(catalog, body)
            case "loadNamespaceMetadata":
                return await namespaces.load_namespace(catalog, db)
            case "namespaceExists":
                return await namespaces.namespace_exists(catalog, db)
            case "dropNamespace":
                return await namespaces.drop_namespace(catalog, db)
            case "updateProperties":
                return await namespaces.update_properties(catalog, db, body)
            case "listTables":
                return await tables.list_tables(catalog, db, query)
            case "createTable":
                return await tables.create_table(catalog, db, body)
            case "loadTable":
                return await tables.load_table(catalog, db, table, query, request.headers.get(hdrs.IF_NONE_MATCH))
            case "tableExists":
                return await tables.table_exists(catalog, db, table)
            case "updateTable":
                return await commit.commit_table(catalog, db, table, body)
            case "dropTable":
                return await tables.drop_table(catalog, db, table, query)
            case "renameTable":
                return await tables.rename_table(catalog, body)
        raise AssertionError(f"route without an operation: {route.operation}")  # pragma: no cover

    @staticmethod
    def _response(reply: Reply, head: bool) -> web.Response:
        if reply.status in (204, 304) or reply.body is None:
            response = web.Response(status=reply.status)
        else:
            body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            response = web.Response(status=reply.status, body=None if head else body,
                                    content_type=errors.CONTENT_TYPE)
        for name, value in reply.headers:
            response.headers[name] = value
        return response

    def _subpath(self, request: web.BaseRequest) -> str:
        target = request.raw_path
        if not target.startswith("/"):
            target = urlsplit(target).path  # absolute form
        return target.partition("?")[0][len(self.prefix):]

    async def _admit(self, exchange: Exchange) -> bytes:
        """The body, then the request-side steps; their refusals in the error model."""
        request = exchange.request
        try:
            body = await read_body(request, self.limits)
            await self.chain.on_request(exchange)
        except Unauthenticated as exc:
            headers = exc.headers.items() if isinstance(exc.headers, dict) else exc.headers
            raise errors.NotAuthorized("authentication required", headers) from None
        except Forbidden as exc:
            raise errors.Forbidden(exc.reason) from None
        except Throttled as exc:
            raise errors.TooManyRequests("too many failed authentications",
                                         [(hdrs.RETRY_AFTER, str(exc.retry_after))]) from None
        except TooLarge as exc:
            raise errors.PayloadTooLarge(exc.reason) from None
        except BodyTimeout as exc:
            raise errors.RequestTimeout(exc.reason) from None
        return body

def _label(error: IcebergError) -> str:
    """The outcome label of an error answer (``hms_gateway_requests_total``)."""
    return {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 408: "bad_request",
            413: "too_large", 429: "throttled", 503: "upstream_unavailable",
            502: "upstream_unavailable", 504: "upstream_timeout"}.get(error.status, "exception")
