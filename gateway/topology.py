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
from gateway.providers.authentication.base import AuthenticationProvider
from gateway.providers.authentication.throttle import AuthFailureThrottle
from gateway.providers.authorization import Authorizer
from gateway.providers.identity import IdentityAsserter
from gateway.upstream.failover import Upstream
from gateway.upstream.http import HttpUpstream
from gateway.upstream.pool import UpstreamPool


@dataclass(frozen=True)
class Service:
    """One service of a topology: where it listens, what it exposes, where it dispatches."""

    topology: str
    config: ServiceConfig
    methods: frozenset[str]
    upstream: Upstream
    authorizer: Authorizer
    limiter: ConcurrencyLimiter

    @property
    def path(self) -> str:
        return self.config.path


@dataclass(frozen=True)
class Topology:
    name: str
    authentication: tuple[AuthenticationProvider, ...]
    identity: IdentityAsserter
    services: dict[str, Service]
    #: Repeated-failure slow-down and 429 (None: off).
    throttle: AuthFailureThrottle | None = None

    def challenges(self) -> list[str]:
        """Every ``WWW-Authenticate`` challenge this topology offers, in provider order."""
        return [c for provider in self.authentication if (c := provider.challenge())]


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


def build_topology(config: TopologyConfig, gateway: GatewayConfig) -> Topology:
    """Providers and upstream pools for one validated topology (no I/O until the first request).

    Raises :class:`ConfigError` when the topology needs something the gateway file lacks.
    """
    providers = _authentication_providers(config, gateway)
    services = {}
    for svc in config.services:
        up = svc.upstream
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
        services[svc.path] = Service(
            config.name,
            svc,
            frozenset(svc.methods),
            Upstream(
                pools,
                max_failover_attempts=up.max_failover_attempts,
                failover_sleep=up.failover_sleep_seconds,
                probe_interval=up.probe_interval_seconds,
                round_robin=up.round_robin,
            ),
            Authorizer(svc.authorization),
            ConcurrencyLimiter(svc.max_concurrent_requests),
        )
    throttle = AuthFailureThrottle(config.providers.failure_throttle, topology=config.name)
    return Topology(config.name, providers, IdentityAsserter(config.providers.identity_assertion), services, throttle)


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

    async def close(self) -> None:
        for service in self.services():
            await service.upstream.close()
