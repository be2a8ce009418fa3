"""The management listener (plain HTTP): ``/metrics``, ``/healthz``, ``/readyz``.

``/healthz`` answers 200 while the process runs; ``/readyz`` answers 200 when the readiness
check finds nothing wrong (the gateway's: some service's upstream answers a Thrift call and the
process is not draining), else 503 naming what is wrong. With ``workers: N`` the supervisor
serves this listener once for all workers (gateway/workers.py): ``/metrics`` aggregated from
their multiprocess files, ``/readyz`` asking the workers.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.observability.metrics import REGISTRY

ReadinessCheck = Callable[[], Awaitable[list[str]]]


def _this_process() -> bytes:
    return generate_latest(REGISTRY)


def management_app(
    readiness: ReadinessCheck,
    exposition: Callable[[], bytes] = _this_process,
    before_scrape: Callable[[], Awaitable[None]] | None = None,
) -> web.Application:
    """``readiness()`` returns the list of problems (empty when ready); ``exposition()`` the
    ``/metrics`` body in Prometheus text format (default: this process's :data:`REGISTRY`), run
    in a thread, after ``before_scrape()`` when given."""

    async def metrics_handler(_: web.Request) -> web.Response:
        if before_scrape is not None:
            await before_scrape()
        body = await asyncio.get_running_loop().run_in_executor(None, exposition)
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
