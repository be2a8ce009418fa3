"""Topologies at run time: each topology's providers and services, and the routing table.

A topology (Knox's term) is a named set of authentication providers plus services; a service is
a URL path below ``/gateway/{topology}/`` dispatched to upstream Hive Metastores. This module
turns validated :mod:`gateway.config` objects into the objects a request uses: for each service,
its kind's handler (:data:`gateway.services.KINDS`) with the chain of the step roles the kind
asks for (its ``roles``; :data:`gateway.pipeline.steps.STEPS`).
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
from gateway.pipeline.step import StepContext
from gateway.pipeline.steps import build_chain
from gateway.policy import load_policy_file
from gateway.services import KINDS, service_kind
from gateway.services.base import ServiceContext, ServiceKind, validate_options
from gateway.thrift.schema import ServiceSchema, load_schema
from gateway.upstream.failover import Upstream


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


def build_topology(
    config: TopologyConfig, gateway: GatewayConfig, schema: ServiceSchema | None = None
) -> Topology:
    """Services of one validated topology, each with its kind's handler, step chain and upstream
    pools (no I/O until the first request). ``schema``: the IDL (default: the bundled one).

    Every entry's kind and options are validated before anything is built. Raises
    :class:`ConfigError` when an entry names an unknown kind, has bad options, or needs
    something the gateway file lacks.
    """
    schema = schema or load_schema()
    source = str(config.source or config.name)
    kinds, options = [], {}
    for i, svc in enumerate(config.services):
        kind = service_kind(svc.kind)
        if kind is None:
            raise ConfigError(source, f"services[{i}].kind",
                              f"unknown service kind {svc.kind!r}; known: {', '.join(sorted(KINDS))}")
        kinds.append(kind)
        options[svc.path] = validate_options(kind.Options, source, i, svc.kind, svc.options,
                                             {"schema": schema})
    siblings = {s.path: s for s in config.services}
    shared: dict = {}  # what every service of this topology shares (authentication, ...)
    services = {}
    for i, (svc, kind) in enumerate(zip(config.services, kinds)):
        engine = load_policy_file(svc.policy_file) if svc.policy_file is not None else None
        steps = StepContext(config.name, svc, schema, gateway, options[svc.path], engine, source, i,
                            siblings, options, config.providers, shared)
        # Knox builds a provider chain per service from the roles it asks for; so does this.
        ctx = ServiceContext(**vars(steps), chain=build_chain(kind.roles, steps))
        services[svc.path] = Service(
            config.name, svc, ConcurrencyLimiter(svc.max_concurrent_requests), kind.build(ctx)
        )
    return Topology(config.name, services)


class Router:
    """Maps ``(topology, service path)`` to a :class:`Service`."""

    def __init__(self, topologies: dict[str, Topology]):
        self.topologies = topologies

    def resolve(self, topology: str, path: str) -> tuple[Topology, Service] | None:
        """The topology and service for a request path, or None (the caller answers 404): the
        service of exactly that path, else the nearest service above it whose kind declares
        ``serves_subpaths`` (``iceberg-rest``: ``.../v1/...``)."""
        topo = self.topologies.get(topology)
        if topo is None:
            return None
        service = topo.services.get(path)
        head = path
        while service is None and "/" in head:  # kinds that serve the paths below their own
            head = head.rpartition("/")[0]
            found = topo.services.get(head)
            if found is not None and getattr(found.handler, "serves_subpaths", False):
                service = found
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
