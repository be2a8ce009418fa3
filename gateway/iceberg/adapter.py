"""What answers the requests of one ``iceberg-rest`` service: the route table, the handlers,
PyIceberg's model and the metadata files (:class:`CatalogAdapter`).

The kind's front (:mod:`gateway.iceberg.kind`: its options, error model and the
frame's hooks) is imported with the topology; this module, and PyIceberg with it, only when a
service gets its first request (:data:`gateway.iceberg.kind.ADAPTER`), so a worker that
has served no Iceberg request does not hold PyIceberg (about 35 MiB). Serving never imports
pyarrow (about 55 MiB, which PyIceberg's ``PyArrowFileIO`` would bring): metadata files and
manifests are read and written with the gateway's FileIO (:mod:`gateway.lakehouse.file_io`,
fsspec's).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Protocol
from urllib.parse import urlsplit

from aiohttp import hdrs, web

from gateway.cache.reads import MetadataCache
from gateway.cache.session import CacheSession, report as report_cache
from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.files import MetadataFiles
from gateway.iceberg.manifest_cache import MIB, ManifestCache
from gateway.iceberg.plan_cache import PlanCache
from gateway.iceberg.plan_executor import PlanExecutor
from gateway.iceberg.plan_flights import Flights
from gateway.iceberg.routes import RouteMatch, answer, route_of, match
from gateway.iceberg.service_state import LOCK_HEARTBEAT_SECONDS, ServiceState
from gateway.iceberg.signer import SIGNING_REASON, SUMMARIZED
from gateway.lakehouse.storage import S3Storage
from gateway.iceberg.vending import Vendor
from gateway.iceberg.warehouses import WarehouseView
from gateway.observability.audit import AuditEvent
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.step import Chain
from gateway.policy import PolicyEngine
from gateway.policy.view import CatalogView
from gateway.thrift.schema import ServiceSchema
from gateway.upstream.failover import Upstream
from gateway.upstream.locks import Schedule
from gateway.upstream.metastore import MetastoreClient

__all__ = ["CatalogAdapter", "ServiceFront", "route_of"]

#: Operations sent with POST that change nothing in the catalog, so they read through the cache.
_READS_ONLY = frozenset({"signRequest", "signS3Request", "reportMetrics", "planTableScan", "fetchScanTasks"})


class ServiceFront(Protocol):
    """What the adapter uses of its service's front
    (:class:`gateway.iceberg.kind.IcebergRestService`)."""

    topology: str
    path: str
    prefix: str  # the service's URL path, /gateway/{topology}/{path}
    upstream: Upstream
    chain: Chain
    schema: ServiceSchema
    policy: PolicyEngine | None
    cache: MetadataCache | None
    storage: S3Storage | None
    vendor: Vendor | None
    options: Any  # the kind's IcebergRestOptions (its module imports this one's name)

    def record_policy(self, event: AuditEvent, view: CatalogView, decision: str | None) -> None: ...


class CatalogAdapter:
    """The request side of one ``iceberg-rest`` service, built from its kind's front: the
    route of a path, and the operation's answer on the request's
    :class:`~gateway.iceberg.catalog.Catalog`."""

    def __init__(self, front: ServiceFront):
        self.front = front
        options, storage = front.options, front.storage
        # The gateway's own S3 key for metadata files; explicit file_io properties win.
        self.files = MetadataFiles({**(storage.file_io() if storage else {}), **options.file_io})
        self.service = ServiceState(
            topology=front.topology, path=front.path, prefix=front.prefix, hive2_compatible=options.hive2_compatible,
            lock=Schedule(check_min=options.lock_check_min_wait_seconds,
                          check_max=options.lock_check_max_wait_seconds, wait=options.lock_wait_seconds,
                          heartbeat=LOCK_HEARTBEAT_SECONDS, timeout=options.lock_timeout_seconds),
            trusted_engines=frozenset(options.trusted_engines), register_prefixes=options.register_prefixes,
            allowed_locations=options.allowed_locations, warehouses=MappingProxyType(dict(options.warehouses)),
            storage=storage, vendor=front.vendor,
            authentication=next((step for step in getattr(front.chain, "steps", ()) if step.name == "authentication"),
                                None),
            planning=options.planning,
            manifests=ManifestCache(int(options.planning.manifest_cache_mib * MIB), (front.topology, front.path)),
            planner=PlanExecutor(options.planning.threads, options.planning.threads_per_user),
            answers=PlanCache(int(options.planning.plan_cache_mib * MIB), options.planning.plan_cache_seconds,
                              (front.topology, front.path)),
            flights=Flights((front.topology, front.path)),
        )

    def target(self, request: web.BaseRequest) -> RouteMatch:
        """The route of the path below the service. Raises 404 for a path the API lacks, 405,
        400 for bad names (:func:`gateway.iceberg.routes.match`)."""
        return match(request.method, self._subpath(request), self.front.options.warehouses.keys())

    @staticmethod
    def public(target: RouteMatch) -> bool:
        return route_of(target.operation).public

    async def serve(self, exchange: Exchange, target: RouteMatch, body: bytes) -> tuple[web.StreamResponse, str]:
        """The operation's handler on the request's :class:`Catalog` (errors in the spec's model)."""
        front, request, event, route = self.front, exchange.request, exchange.event, target
        event.method = route.operation
        event.database, event.table = route.namespace, route.table
        identity = exchange.identity
        reads = self._reads(request, route)
        if identity is None:  # a public operation (Route.public): no caller yet
            catalog = Catalog(None, CatalogView(front.policy, "", ()), self.files, self.service, "")
        else:
            view = CatalogView(front.policy, identity.user, identity.groups)
            if route.warehouse is not None:
                view = WarehouseView(view, front.options.warehouses[route.warehouse])
            catalog = Catalog(MetastoreClient(front.upstream, front.schema, identity=identity, reads=reads),
                              view, self.files, self.service, identity.user)
        try:
            reply = await answer(catalog, route, request, body)
        finally:
            if catalog.objects != (None, None):
                event.database, event.table = catalog.objects
            front.record_policy(event, catalog.view, catalog.decision)
            if request.get(SUMMARIZED) is not None:  # remote signing: one line per many
                event.summarized = request[SUMMARIZED]
                event.reason = request.get(SIGNING_REASON)
            if identity is None and catalog.user:
                event.user = catalog.user
            if front.cache is not None:
                report_cache(request, event, reads)
        return self._response(reply, request.method == hdrs.METH_HEAD), "ok"

    def _reads(self, request: web.BaseRequest, route: RouteMatch) -> CacheSession | None:
        """The request's cache session when it may read through the cache: a safe method
        (RFC 9110 section 9.2.1) or the signer, which changes nothing in the catalog. Commits
        and the other writes read HMS itself (they compare what they read under the lock)."""
        if self.front.cache is None:
            return None
        if request.method in (hdrs.METH_GET, hdrs.METH_HEAD) or route.operation in _READS_ONLY:
            return CacheSession(self.front.cache)
        return None

    @staticmethod
    def _response(reply: Reply, head: bool) -> web.Response:
        if reply.status in (204, 304) or reply.body is None:
            response = web.Response(status=reply.status)
        else:  # the JSON the route's response model wrote (gateway.iceberg.routes.answer)
            response = web.Response(status=reply.status, body=None if head else reply.body,
                                    content_type=errors.CONTENT_TYPE)
        for name, value in reply.headers:
            response.headers[name] = value
        return response

    def _subpath(self, request: web.BaseRequest) -> str:
        target = request.raw_path
        if not target.startswith("/"):
            target = urlsplit(target).path  # absolute form
        return target.partition("?")[0][len(self.front.prefix):]
