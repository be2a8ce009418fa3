"""The gateway process: the HTTPS gateway listener and the plain-HTTP management listener."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Callable

from aiohttp import web

from gateway.certs import certificate_not_after
from gateway.config import GatewayConfig, TopologyConfig
from gateway.dispatch import Dispatcher
from gateway.observability import metrics
from gateway.observability.management import management_app
from gateway.thrift.schema import ServiceSchema, load_schema
from gateway.thrift.translate import encode_binary_call
from gateway.tls import server_ssl_context
from gateway.topology import Router, build_topology
from gateway.upstream.errors import UpstreamError

log = logging.getLogger(__name__)

_PROBE = encode_binary_call("get_all_databases", 0, [])
_PROBE_TIMEOUT_SECONDS = 3.0


class Gateway:
    """Both listeners of one gateway process. ``start()`` binds, ``stop()`` releases everything.

    After ``start()``, :attr:`gateway_port` and :attr:`management_port` hold the bound ports
    (useful when the configuration asks for port 0).
    """

    def __init__(
        self,
        config: GatewayConfig,
        topologies: dict[str, TopologyConfig],
        schema: ServiceSchema | None = None,
    ):
        self.config = config
        self.schema = schema or load_schema()
        self.router = Router({name: build_topology(t, config) for name, t in topologies.items()})
        self.ssl_context = server_ssl_context(config.tls)
        self._runners: list[web.AppRunner] = []
        self.gateway_port = self.management_port = 0

    def gateway_app(self) -> web.Application:
        dispatcher = Dispatcher(self.router, self.schema, self.config.limits.max_request_bytes)
        # The dispatcher enforces the body limit itself (413), streaming; aiohttp's must not win.
        app = web.Application(client_max_size=self.config.limits.max_request_bytes + 1)
        app.router.add_route("*", "/gateway/{topology}/{path:.+}", dispatcher)
        return app

    async def readiness(self) -> list[str]:
        """Empty when an upstream HMS answers a Thrift call, else what failed for every service.

        One answering service is enough: a pod whose other upstreams are down still serves the
        services that work, and stays in the Kubernetes Service.
        """

        async def probe(service) -> str | None:
            try:
                async with asyncio.timeout(_PROBE_TIMEOUT_SECONDS):
                    await service.upstream.call(_PROBE)
                return None
            except (UpstreamError, TimeoutError) as exc:
                return f"{service.topology}/{service.path}: {exc or 'timeout'}"

        results = await asyncio.gather(*(probe(s) for s in self.router.services()))
        return [] if None in results else [r for r in results if r]

    async def start(self) -> None:
        listeners = self.config.listeners
        gw = web.AppRunner(self.gateway_app(), access_log=None)
        await gw.setup()
        await web.TCPSite(
            gw, listeners.gateway.host, listeners.gateway.port, ssl_context=self.ssl_context
        ).start()
        self._runners.append(gw)
        mgmt = web.AppRunner(management_app(self.readiness), access_log=None)
        await mgmt.setup()
        await web.TCPSite(mgmt, listeners.management.host, listeners.management.port).start()
        self._runners.append(mgmt)
        self.gateway_port = gw.addresses[0][1]
        self.management_port = mgmt.addresses[0][1]
        expiry = certificate_not_after(self.config.tls.certificate)
        metrics.CERTIFICATE_EXPIRY.labels(listener="gateway").set(expiry.timestamp())
        log.info(
            "gateway listening on https://%s:%d, management on http://%s:%d",
            listeners.gateway.host, self.gateway_port, listeners.management.host, self.management_port,
        )

    async def stop(self) -> None:
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        await self.router.close()


async def run_until_signalled(
    gateway: Gateway, on_started: Callable[[Gateway], None] | None = None
) -> None:
    """Start ``gateway``, call ``on_started(gateway)``, serve until SIGINT or SIGTERM, stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await gateway.start()
    try:
        if on_started:
            on_started(gateway)
        await stop.wait()
    finally:
        log.info("stopping")
        await gateway.stop()
