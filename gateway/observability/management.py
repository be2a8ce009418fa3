"""The management listener (plain HTTP): ``/metrics``, ``/healthz``, ``/readyz``.

``/healthz`` answers 200 while the process runs; ``/readyz`` answers 200 when the readiness
check finds nothing wrong (the gateway's: some service's upstream answers a Thrift call and the
process is not draining), else 503 naming what is wrong.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.observability.metrics import REGISTRY

ReadinessCheck = Callable[[], Awaitable[list[str]]]


def management_app(readiness: ReadinessCheck) -> web.Application:
    """``readiness()`` returns the list of problems (empty when ready)."""

    async def metrics_handler(_: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, generate_latest, REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        problems = await readiness()
        if problems:
            return web.Response(status=503, text="not ready: " + "; ".join(problems) + "\n")
        return web.Response(text="ready\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
