"""What every service kind is given and what it must offer (the seam of :data:`KINDS`).

A kind (Knox's service role made meaningful) serves the requests routed to one service path.
It is built once per service when its topology is built (start-up and each reload), from a
:class:`ServiceContext`; the gateway then calls :meth:`ServiceKind.start` when the topology goes
live and :meth:`ServiceKind.close` when a reload has replaced it or at shutdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from aiohttp import web
from pydantic import BaseModel, ValidationError

from gateway.cache.reads import MetadataCache
from gateway.cache.settings import CacheOptions
from gateway.config import ConfigError, GatewayConfig, ServiceConfig, reported_error
from gateway.pipeline.step import Chain, StepContext
from gateway.upstream.failover import Upstream
from gateway.upstream.http import HttpUpstream
from gateway.upstream.pool import UpstreamPool
from gateway.upstream.settings import UpstreamConfig

if TYPE_CHECKING:
    from gateway.pipeline.exchange import Exchange


@dataclass(frozen=True, eq=False)
class ServiceContext(StepContext):
    """Everything a kind may use to build one service: the :class:`StepContext` its steps were
    built from, plus ``chain``, those steps (the roles the kind's ``roles`` names, built by
    :func:`gateway.pipeline.steps.build_chain`), and :meth:`upstream`."""

    chain: Chain = field(kw_only=True)
    _upstream: list = field(default_factory=list, repr=False, kw_only=True)

    def upstream(self) -> Upstream:
        """The HMS pools of the service's ``upstream:`` (built once; no I/O until a call).

        Raises :class:`ConfigError` when the entry has no ``upstream:``.
        """
        if not self._upstream:
            if self.config.upstream is None:
                raise self.error("upstream", f"service kind {self.config.kind!r} needs an upstream")
            self._upstream.append(build_upstream(self.config, self.gateway))
        return self._upstream[0]

    def metadata_cache(self, options: CacheOptions) -> MetadataCache | None:
        """The metadata cache (:mod:`gateway.cache`) of the service's ``options.cache``
        (None when not enabled), over :meth:`upstream`. Raises :class:`ConfigError` naming
        ``options.cache`` (an IDL the cache cannot work with, no ``upstream:``)."""
        if not options.enabled:
            return None
        return MetadataCache(options, self.upstream(), self.schema, (self.topology, self.config.path),
                             lambda reason: self.error("options.cache", reason))


def build_upstream(svc: ServiceConfig, gateway: GatewayConfig) -> Upstream:
    """The failover set of pools for ``svc.upstream`` (which must be set); no I/O."""
    up = svc.upstream
    assert up is not None
    pools = [
        HttpUpstream(
            url,
            connect_timeout=up.connect_timeout_seconds,
            timeout=up.timeout_seconds,
            pool_size=up.pool_size,
            max_reply_bytes=gateway.limits.max_reply_bytes,
        )
        if url.lower().startswith(("http://", "https://"))
        else UpstreamPool(
            url,
            framed=up.transport == "framed",
            connect_timeout=up.connect_timeout_seconds,
            timeout=up.timeout_seconds,
            pool_size=up.pool_size,
            max_identities=up.max_identities,
            max_reply_bytes=gateway.limits.max_reply_bytes,
            connector=_connector(up, url, gateway),
        )
        for url in up.urls
    ]
    return Upstream(
        pools,
        max_failover_attempts=up.max_failover_attempts,
        failover_sleep=up.failover_sleep_seconds,
        probe_interval=up.probe_interval_seconds,
        round_robin=up.round_robin,
    )


def _connector(up: UpstreamConfig, url: str, gateway: GatewayConfig):
    """SASL to a Kerberized HMS when ``up.sasl`` is set; None: plain Thrift (the pool's default)."""
    if up.sasl is None:
        return None
    from gateway.upstream.secure import SaslConnector  # gssapi and Cyrus SASL only when used

    return SaslConnector(up.sasl, urlsplit(url).hostname or "localhost", gateway.limits.max_reply_bytes)


def key_path(loc: tuple) -> str:
    """A pydantic error location as a configuration key suffix: ``.key`` and ``[i]``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def validate_options(model: type[BaseModel] | None, ctx_source: str, index: int,
                     kind: str, options: dict[str, Any], context: dict[str, Any] | None = None) -> Any:
    """``options`` validated into ``model`` (pydantic validation ``context``: ``schema``, the
    IDL); errors name ``services[i].options.<key>`` (list items as ``<key>[j]``).

    Raises :class:`ConfigError` for bad options, or options given to a kind that takes none.
    """
    if model is None:
        if options:
            raise ConfigError(ctx_source, f"services[{index}].options",
                              f"service kind {kind!r} takes no options")
        return None
    try:
        return model.model_validate(options, context=context)
    except ValidationError as exc:
        loc, reason = reported_error(model, exc)
        raise ConfigError(ctx_source, f"services[{index}].options{key_path(loc)}", reason) from None


class ServiceKind(Protocol):
    """A service kind's handler, one per service."""

    kind: ClassVar[str]
    #: The step roles of its chain, in data-path order (:data:`gateway.pipeline.steps.STEPS`):
    #: the one place a kind's chain is stated.
    roles: ClassVar[tuple[str, ...]]
    #: The kind's own settings (a topology's ``options:``), or None when it takes none.
    Options: ClassVar[type[BaseModel] | None]
    #: The HMS pools it calls (probed by ``/readyz``), or None for kinds that call none.
    upstream: Upstream | None
    #: Optional: the :class:`~gateway.pipeline.exchange.Exchange` subclass its requests travel
    #: in (``hms-thrift``: :class:`~gateway.hms_thrift.exchange.ThriftExchange`); the gateway
    #: handler builds a plain ``Exchange`` for a kind that declares none.
    exchange_type: ClassVar[type]

    @classmethod
    def build(cls, ctx: ServiceContext) -> "ServiceKind": ...

    async def handle(self, exchange: "Exchange") -> tuple[web.StreamResponse, str]:
        """The response to one routed request and its outcome label; raises pipeline outcomes
        (:mod:`gateway.pipeline.outcomes`) to end the request early."""
        ...

    async def start(self) -> None:
        """Start background work (a poller, say) when the topology goes live."""
        ...

    async def close(self) -> None:
        """Release everything after a reload replaced the service, or at shutdown."""
        ...


class MetastoreBacked:
    """Start and close of a kind that calls HMS (``upstream``) with an optional metadata cache
    (``cache``, :meth:`ServiceContext.metadata_cache`): ``hms-thrift``, ``glue``,
    ``iceberg-rest``."""

    upstream: Upstream
    cache: MetadataCache | None = None

    async def start(self) -> None:
        """Start the metadata cache's follower; raises ``ConfigError`` as
        :meth:`~gateway.cache.reads.MetadataCache.start`."""
        if self.cache is not None:
            await self.cache.start()

    async def close(self) -> None:
        """Stop the cache, then close the upstream pools gracefully (calls in flight finish)."""
        if self.cache is not None:
            await self.cache.close()
        await self.upstream.close()
