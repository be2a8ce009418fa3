"""Service kind ``iceberg-rest``: the Iceberg REST Catalog API (apache/iceberg
``open-api/rest-catalog-open-api.yaml``) over the service's Hive Metastore, at
``/gateway/{topology}/{service path}/v1/...`` (:mod:`gateway.iceberg`).

This module is the kind's front (options, error model, the frame's hooks), imported with the
topology; the request side (:mod:`gateway.iceberg.adapter`: route table, handlers, PyIceberg) is
imported at the service's first request.

One request, through the HTTP frame (:mod:`gateway.services.http_frame`, with
:class:`~gateway.iceberg.errors.IcebergErrors` as its error model): the body read whole (400 over the size limit, as the spec lists no 413; 408); the
request-side steps (authentication, identity assertion, service ACL; the token endpoint
authenticates its client itself, :mod:`gateway.iceberg.oauth`); the path below the service
picks the operation (:data:`gateway.iceberg.routes.ROUTES`: 404 for a path the API lacks, 405 with
``Allow``) and its handler; HMS is called as the effective
user (``set_ugi``); the catalog policy decides what the user sees (404) and may
do (403). Every refusal is the spec's error model ``{"error": {"message", "type", "code"}}``:
401 ``NotAuthorizedException`` with the topology's challenges, 403 ``ForbiddenException``, 429
with ``Retry-After`` from the failure throttle, 503 ``ServiceUnavailableException`` when HMS is
unreachable, 502 ``ServiceFailureException`` when it fails otherwise (never a 500: 500, 502 and
504 on a commit mean "commit state unknown" to clients, and a commit answers them only then).

Options (``options:`` of the service entry): ``hive2_compatible`` (Hive 2 column types in the
HMS copy of the schema, default true), ``lock_wait_seconds`` (a commit's wait for HMS's table
lock before 409, default 60), ``lock_check_min_wait_seconds``/``lock_check_max_wait_seconds``
(``check_lock`` back-off, 0.02 and 0.25), ``lock_timeout_seconds`` (HMS's ``hive.txn.timeout``, 300:
docs/operations.md, HMS locks), ``file_io`` (PyIceberg FileIO properties for the
metadata files, such as ``s3.endpoint``; values are never logged), ``s3`` (an S3 warehouse: the
gateway's key from a credentials file or the environment, vended credentials and remote
signing, :mod:`gateway.lakehouse.storage`), ``register_prefixes``
(locations below which ``register`` may take metadata files besides the namespace's own),
``trusted_engines`` (the principals, a ``doAs`` impersonator or else the effective user, that
may load a table with columns denied to the user, a row filter or a mask, with them stated as
the load result's ``read-restrictions``, :mod:`gateway.iceberg.trusted`; as the ``glue`` kind's), ``warehouses``
(catalogs under a ``{prefix}``, each a group of HMS databases, :mod:`gateway.iceberg.warehouses`),
``planning`` (server-side scan planning: ``manifest_cache_mib``, ``wait_seconds``,
``files_per_task``, ``expiry_seconds``, the caps ``max_pending`` and ``max_pending_per_user``,
the planner's ``threads`` and ``threads_per_user``, the filter's bounds ``max_filter_depth``,
``max_filter_bytes``, ``max_filter_literals``, ``max_residual_bytes``, and the plan cache's
``plan_cache_mib`` and ``plan_cache_seconds``,
:class:`gateway.iceberg.plan_store.PlanningOptions`, :mod:`gateway.iceberg.scan_plans`).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import hdrs, web
from pydantic import Field, field_validator, model_validator

from gateway.cache.reads import MetadataCache
from gateway.cache.settings import CacheOptions
from gateway.config import Limits
from gateway.iceberg import errors
from gateway.iceberg.errors import IcebergErrors
from gateway.iceberg.locations import checked as checked_location
from gateway.iceberg.plan_store import PlanningOptions
from gateway.lakehouse.storage import S3Options, S3Storage, load_storage
from gateway.iceberg.vending import Vendor
from gateway.iceberg.warehouses import Warehouses
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.step import Chain
from gateway.policy import PolicyEngine
from gateway.registry import resolve
from gateway.services.base import ServiceContext
from gateway.services.http_frame import HttpKind
from gateway.settings_model import SettingsModel
from gateway.thrift.schema import ServiceSchema
from gateway.upstream.failover import Upstream

if TYPE_CHECKING:
    from gateway.iceberg.adapter import CatalogAdapter
    from gateway.iceberg.paths import RouteMatch

log = logging.getLogger(__name__)

#: The request side (route table, handlers, PyIceberg), imported at a service's first request:
#: a worker that served no Iceberg request holds no PyIceberg, and serving imports no pyarrow
#: (issue 41, :mod:`gateway.lakehouse.file_io`).
ADAPTER = "gateway.iceberg.adapter:CatalogAdapter"
#: The route table's lookup of an operation, for the error model of a request the adapter served.
ROUTE_OF = "gateway.iceberg.adapter:route_of"


class IcebergRestOptions(SettingsModel):
    """The ``iceberg-rest`` kind's ``options:``."""

    hive2_compatible: bool = True
    lock_wait_seconds: float = Field(default=60.0, gt=0, le=3600)
    lock_check_min_wait_seconds: float = Field(default=0.02, gt=0, le=60)
    lock_check_max_wait_seconds: float = Field(default=0.25, gt=0, le=60)
    #: HMS's ``hive.txn.timeout``: a lock blocking a commit not heard of for longer is released.
    lock_timeout_seconds: float = Field(default=300.0, gt=0)
    file_io: dict[str, str] = Field(default_factory=dict, repr=False)
    #: Principals that may load tables with columns denied to the user (as the glue kind's).
    trusted_engines: list[str] = Field(default_factory=list)
    #: The metadata cache of this service's HMS reads (:mod:`gateway.cache`), off by default.
    cache: CacheOptions = Field(default_factory=CacheOptions)
    #: S3 warehouse: the gateway's key, endpoint, and the role for vended credentials and
    #: remote signing (:mod:`gateway.lakehouse.storage`).
    s3: S3Options | None = None
    #: Locations (URIs) below which ``register`` may take metadata files, besides the
    #: namespace's own location (:mod:`gateway.iceberg.register`).
    register_prefixes: tuple[str, ...] = ()
    #: Locations (URIs) inside which namespaces, tables and views may lie, besides HMS's
    #: warehouse (:mod:`gateway.iceberg.locations`).
    allowed_locations: tuple[str, ...] = ()

    @field_validator("allowed_locations")
    @classmethod
    def _locations(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            checked_location(value)
        return values
    #: Catalogs served under a ``{prefix}``: name → the HMS databases it serves
    #: (:mod:`gateway.iceberg.warehouses`).
    warehouses: Warehouses = Field(default_factory=dict)
    #: Server-side scan planning (:mod:`gateway.iceberg.scan_plans`): the manifest cache's
    #: size, the synchronous bound, the split into plan tasks, the expiry of plan ids.
    planning: PlanningOptions = Field(default_factory=PlanningOptions)

    @model_validator(mode="after")
    def _back_off(self) -> "IcebergRestOptions":
        if self.lock_check_max_wait_seconds < self.lock_check_min_wait_seconds:
            raise ValueError("lock_check_max_wait_seconds must not be below lock_check_min_wait_seconds")
        return self


class IcebergRestService(HttpKind):
    """Serves one ``iceberg-rest`` service: ``upstream`` its HMS list, ``chain`` its steps,
    ``policy`` its catalog policy (None: everything visible)."""

    kind = "iceberg-rest"
    roles = ("authentication", "identity-assertion", "authorization")
    Options = IcebergRestOptions
    #: The operation is named only once the adapter served the request, so it is imported then.
    errors = IcebergErrors(lambda operation: resolve(ROUTE_OF)(operation).error_model)
    #: The router hands this kind the paths below its own (``.../v1/...``).
    serves_subpaths = True

    def __init__(self, topology: str, path: str, upstream: Upstream, chain: Chain,
                 schema: ServiceSchema, policy: PolicyEngine | None, limits: Limits,
                 options: IcebergRestOptions, storage: S3Storage | None = None,
                 cache: MetadataCache | None = None):
        self.topology, self.path = topology, path
        self.cache = cache
        self.upstream, self.chain, self.schema, self.policy = upstream, chain, schema, policy
        self.limits, self.options, self.storage = limits, options, storage
        self.prefix = f"/gateway/{topology}/{path}"
        # built with the topology: a bad STS endpoint fails the start, not a request
        self.vendor = Vendor(storage) if storage is not None and storage.options.role_arn else None
        self._adapter: CatalogAdapter | None = None
        self._loading = asyncio.Lock()

    @classmethod
    def build(cls, ctx: ServiceContext) -> IcebergRestService:
        """The handler of one ``iceberg-rest`` service. Raises ``ConfigError`` without ``upstream``."""
        options = ctx.options or IcebergRestOptions()
        storage = None
        if options.s3 is not None:
            try:
                storage = load_storage(options.s3, Path(ctx.source).parent if ctx.source else Path.cwd())
            except ValueError as exc:
                key, reason = exc.args
                raise ctx.error(f"options.{key}", reason) from None
        return cls(ctx.topology, ctx.config.path, ctx.upstream(), ctx.chain, ctx.schema,
                   ctx.policy, ctx.gateway.limits, options, storage, ctx.metadata_cache(options.cache))

    def screen(self, request: web.BaseRequest) -> None:
        """Raises 415 for a compressed body: never inflated here (no client sends one, and a
        bomb costs nothing to send)."""
        coding = request.headers.get(hdrs.CONTENT_ENCODING, "identity").strip().lower()
        if coding != "identity":
            raise errors.UnsupportedMediaType(f"Content-Encoding {coding[:40]!r} is not accepted: send the "
                                              "request body uncompressed", [(hdrs.ACCEPT_ENCODING, "identity")])

    async def handle(self, exchange: Exchange) -> tuple[web.StreamResponse, str]:
        """:meth:`HttpKind.handle`, once the adapter is loaded (the first request imports it in a
        thread, so the worker's other requests go on meanwhile)."""
        if self._adapter is None:
            async with self._loading:
                if self._adapter is None:
                    adapter = await asyncio.to_thread(resolve, ADAPTER)
                    self._adapter = adapter(self)
        return await super().handle(exchange)

    @property
    def adapter(self) -> CatalogAdapter:
        """The loaded adapter; raises ``RuntimeError`` before :meth:`handle` loaded it."""
        if self._adapter is None:
            raise RuntimeError("the iceberg-rest adapter is loaded by the service's first request")
        return self._adapter

    def target(self, request: web.BaseRequest) -> RouteMatch:
        """The route of the path below the service (:meth:`CatalogAdapter.target`)."""
        return self.adapter.target(request)

    def public(self, target: RouteMatch) -> bool:
        return self.adapter.public(target)

    async def serve(self, exchange: Exchange, target: RouteMatch, body: bytes) -> tuple[web.StreamResponse, str]:
        """The operation's handler (:meth:`CatalogAdapter.serve`; errors in the spec's model)."""
        return await self.adapter.serve(exchange, target, body)
