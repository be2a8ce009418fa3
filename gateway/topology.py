"""Topologies at run time: each topology's providers and services, and the routing table.

A topology (Knox's term) is a named set of authentication providers plus services; a service is
a URL path below ``/gateway/{topology}/`` dispatched to upstream Hive Metastores. This module
turns validated :mod:`gateway.config` objects into the objects a request uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import (
    ConfigError,
    GatewayConfig,
    ServiceConfig,
    TopologyConfig,
)
from gateway.limits import ConcurrencyLimiter
from gateway.pipeline.step import Chain
from gateway.pipeline.steps.authentication import Authentication
from gateway.pipeline.steps.catalog_policy import CatalogPolicy
from gateway.pipeline.steps.exposure import MethodExposure
from gateway.pipeline.steps.identity_assertion import IdentityAssertion
from gateway.pipeline.steps.ownership import OwnershipAssertion
from gateway.pipeline.steps.service_acl import ServiceAcl
from gateway.pipeline.steps.ugi_claim import UgiClaim
from gateway.policy import load_policy_file
from gateway.providers.ownership import OwnerAssertion
from gateway.services import KINDS, service_kind
from gateway.services.base import ServiceContext, ServiceKind, validate_options
from gateway.thrift.schema import ServiceSchema, load_schema
from gateway.providers.authentication.base import AuthenticationProvider
from gateway.providers.authentication.throttle import AuthFailureThrottle
from gateway.providers.authorization import Authorizer
from gateway.providers.identity import IdentityAsserter
from gateway.upstream.failover import Upstream
from gateway.upstream.http import HttpUpstream
from gateway.upstream.pool import UpstreamPool


@dataclass(frozen=True)
class Service:
    """One service of a topology: its path, its admission limit, and the handler of its kind
    (which holds the service's step chain and, for kinds that call HMS, its upstream)."""

    topology: str
    config: ServiceConfig
    limiter: ConcurrencyLimiter
    handler: ServiceKind

    @property
    def path(self) -> str:
        return self.config.path

    @property
    def upstream(self) -> Upstream | None:
        return self.handler.upstream


@dataclass(frozen=True)
class Topology:
    name: str
    services: dict[str, Service]


def _authentication_providers(
    config: TopologyConfig, gateway: GatewayConfig
) -> tuple[AuthenticationProvider, ...]:
    """Each provider's authenticator, made by its settings model (see the provider registry).

    Raises :class:`ConfigError` when a provider's ``check`` finds the gateway file lacking.
    """
    for i, provider in enumerate(config.providers.authentication):
        reason = provider.check(gateway)
        if reason:
            raise ConfigError(config.source or config.name, f"providers.authentication[{i}]", reason)
    return tuple(provider.build() for provider in config.providers.authentication)


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


def build_topology(
    config: TopologyConfig, gateway: GatewayConfig, schema: ServiceSchema | None = None
) -> Topology:
    """Services of one validated topology, each with its step chain, upstream pools and kind's
    handler (no I/O until the first request). ``schema``: the IDL (default: the bundled one).

    Raises :class:`ConfigError` when the topology needs something the gateway file lacks, or
    names an unknown service kind.
    """
    providers = _authentication_providers(config, gateway)
    throttle = AuthFailureThrottle(config.providers.failure_throttle, topology=config.name)
    # Knox builds a provider chain per service; so does the gateway, in data-path order.
    authentication = Authentication(config.name, providers, throttle)
    identity = IdentityAssertion(config.name, IdentityAsserter(config.providers.identity_assertion))
    schema = schema or load_schema()
    ownership = OwnershipAssertion(OwnerAssertion(schema))
    services = {}
    source = str(config.source or config.name)
    for i, svc in enumerate(config.services):
        kind = service_kind(svc.kind)
        if kind is None:
            raise ConfigError(source, f"services[{i}].kind",
                              f"unknown service kind {svc.kind!r}; known: {', '.join(sorted(KINDS))}")
        engine = load_policy_file(svc.policy_file) if svc.policy_file is not None else None
        policy = (CatalogPolicy(config.name, svc.path, engine, schema),) if engine is not None else ()
        chain = Chain((
            authentication,
            identity,
            ServiceAcl(config.name, svc.path, Authorizer(svc.authorization)),
            MethodExposure(config.name, svc.path, frozenset(svc.methods)),
            UgiClaim(config.name, svc.path, schema),  # set_ugi from the identity, never the client
            *policy,
            ownership,
        ))
        options = validate_options(kind.Options, source, i, svc.kind, svc.options)
        ctx = ServiceContext(config.name, svc, chain, schema, gateway, options, engine, source, i,
                             {s.path: s for s in config.services})
        services[svc.path] = Service(
            config.name, svc, ConcurrencyLimiter(svc.max_concurrent_requests), kind.build(ctx)
        )
    return Topology(config.name, services)


class Router:
    """Maps ``(topology, service path)`` to a :class:`Service`."""

    def __init__(self, topologies: dict[str, Topology]):
        self.topologies = topologies

    def resolve(self, topology: str, path: str) -> tuple[Topology, Service] | None:
        """The topology and service for a request path, or None (the caller answers 404)."""
        topo = self.topologies.get(topology)
        if topo is None:
            return None
        service = topo.services.get(path)
        return None if service is None else (topo, service)

    def services(self) -> list[Service]:
        return [s for t in self.topologies.values() for s in t.services.values()]

    async def start(self) -> None:
        """Start every service's background work (:meth:`ServiceKind.start`)."""
        for service in self.services():
            await service.handler.start()

    async def close(self) -> None:
        for service in self.services():
            await service.handler.close()
