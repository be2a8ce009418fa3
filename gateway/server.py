"""The gateway process: the HTTPS gateway listener and the plain-HTTP management listener.

Lifecycle: ``start()`` binds both listeners and starts the topology reloader; ``SIGHUP`` forces
a reload; ``SIGTERM``/``SIGINT`` drain: ``/readyz`` turns unready first, then the gateway
listener stops accepting and requests in flight get ``shutdown.grace_seconds`` to finish, then
upstream connections close.

With ``workers: N`` (gateway/workers.py) each worker process runs one :class:`Gateway` whose
gateway listener shares the port with the other workers (``SO_REUSEPORT``) and whose management
app answers the supervisor on a Unix socket; the supervisor serves the management port.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
import os
import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import uvloop
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from gateway.thrift import accel as thrift_accel
from gateway.certs import certificate_not_after
from gateway.client_address import ClientAddresses
from gateway.config import GatewayConfig, TopologyConfig
from gateway.handler import GatewayHandler
from gateway.http_checks import parse_failure_reason
from gateway.observability.observers import AuditTrail, RequestMetrics
from gateway.observability import metrics
from gateway.observability.audit import REQUEST_ID_HEADER, AuditLog, new_request_id
from gateway.observability.management import management_app
from gateway.proxy_protocol import ProxiedServer, ProxyProtocolListener
from gateway.reload import TopologyReloader
from gateway.thrift.schema import ServiceSchema, load_schema
from gateway.thrift.translate import encode_binary_call
from gateway.tls import server_ssl_context
from gateway.topology import Router, build_topology
from gateway.upstream.errors import UpstreamError

if TYPE_CHECKING:
    from gateway.worker_role import WorkerRole

log = logging.getLogger(__name__)

_PROBE = encode_binary_call("get_all_databases", 0, [])
_PROBE_TIMEOUT_SECONDS = 3.0


_HTTP1_REQUEST_LINE = re.compile(rb"[!-~]+ [!-~]+ HTTP/\d\.\d\r?")
_BAD_REQUEST_LINE_REASON = b"request line is not METHOD TARGET HTTP/x.y\n"
_MAX_REQUEST_LINE = 8190  # aiohttp's own limit (max_line_size)


def _bad_request_line() -> bytes:
    """The whole 400 response to a request line without ``HTTP/x.y`` (a fresh request id)."""
    return (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: %d\r\n%s: %s\r\nConnection: close\r\n\r\n%s" % (
                len(_BAD_REQUEST_LINE_REASON), REQUEST_ID_HEADER.encode(), new_request_id().encode(),
                _BAD_REQUEST_LINE_REASON))


class _GatewayRequestHandler(RequestHandler):
    """aiohttp's connection handler, answering a request its parser refused with the gateway's
    own one-line reason (:func:`gateway.http_checks.parse_failure_reason`) and an
    ``X-Request-Id``: aiohttp's body and log line would quote the offending bytes."""

    __slots__ = ()

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        request_id = new_request_id()
        if status != 400:  # a bug in a handler: aiohttp's generic 500 and its logged traceback
            response = super().handle_error(request, status, exc, message)
        else:
            reason = parse_failure_reason(exc)
            log.info("400 to a request aiohttp could not parse (X-Request-Id %s): %s", request_id, reason)
            response = web.Response(status=400, text=reason + "\n")
            response.force_close()
        response.headers[REQUEST_ID_HEADER] = request_id
        return response


class _GatewayServer(web.Server):
    """aiohttp's low-level server whose connections use :class:`_GatewayRequestHandler`."""

    def __call__(self) -> RequestHandler:
        return _GatewayRequestHandler(self, loop=self._loop, **self._kwargs)


class _ProxiedGatewayServer(_GatewayServer, ProxiedServer):
    """:class:`_GatewayServer` behind PROXY protocol (remembers each connection's source)."""


class _RequestLineCheck(asyncio.Protocol):
    """Stands between the transport and aiohttp's handler for a connection's first request line.

    A line without an ``HTTP/x.y`` version (HTTP/0.9 style, ``GET /``) gets 400 and the
    connection closes at once: aiohttp would wait for headers that never come. Empty lines
    before the request line are skipped (RFC 9112 §2.2). Everything else is forwarded as is.
    """

    __slots__ = ("handler", "_head", "deadline")

    def __init__(self, handler: RequestHandler):
        self.handler = handler
        self._head: bytes | None = b""  # None once the first request line was seen
        #: The header deadline's timer (:class:`_HeaderDeadline`), cancelled with the connection.
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.deadline is not None:
            # Otherwise the timer would keep the closed connection's handler for the whole
            # header timeout: with a connection per call, thousands of them.
            self.deadline.cancel()
            self.deadline = None
        self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    def eof_received(self) -> bool | None:
        return self.handler.eof_received()

    def data_received(self, data: bytes) -> None:
        if self._head is not None and not self._first_line_ok(data):
            return
        self.handler.data_received(data)

    def _first_line_ok(self, data: bytes) -> bool:
        head = (self._head + data).lstrip(b"\r\n")
        end = head.find(b"\n")
        if end < 0:
            self._head = head if len(head) <= _MAX_REQUEST_LINE else None  # aiohttp refuses those
            return True
        self._head = None
        if _HTTP1_REQUEST_LINE.fullmatch(head[:end]):
            return True
        log.info("closing a connection whose request line has no HTTP version")
        transport = self.handler.transport
        if transport is not None:
            transport.write(_bad_request_line())
            transport.close()
        return False


class _HeaderDeadline:
    """Wraps aiohttp's protocol factory: a connection that has not sent a complete request
    header within ``timeout`` seconds of being accepted is closed (slow-loris guard; aiohttp
    itself only bounds idle time between requests); its first request line is checked by
    :class:`_RequestLineCheck`."""

    def __init__(self, server: web.Server, timeout: float, worker: int = 0):
        self._server, self._timeout = server, timeout
        self._accepted = metrics.WORKER_CONNECTIONS.labels(worker=str(worker))

    def __call__(self) -> _RequestLineCheck:
        self._accepted.inc()
        handler = self._server()
        protocol = _RequestLineCheck(handler)
        # RequestHandler has __slots__ without __weakref__: the timer holds it until it fires
        # or the connection is lost (_RequestLineCheck.connection_lost cancels it).
        protocol.deadline = asyncio.get_running_loop().call_later(self._timeout, self._expire, handler)
        return protocol

    @staticmethod
    def _expire(handler: RequestHandler) -> None:
        if handler.transport is not None and handler._request_count == 0:
            log.info("closing a connection that sent no request header in time")
            handler.force_close()
            handler.transport.close()

    def __getattr__(self, name: str):
        return getattr(self._server, name)


class ListenError(Exception):
    """A listener could not bind; ``str()`` is one line naming the address and the config key."""


@contextlib.contextmanager
def listening(listener: str, host: str, port: int) -> Iterator[None]:
    """Turn a failed bind of ``listeners.<listener>`` into a :class:`ListenError`."""
    try:
        yield
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port} (listeners.{listener} in the gateway "
                          f"file): {os.strerror(exc.errno) if exc.errno else exc}") from None


def write_ports_file(path: Path, gateway_port: int, management_port: int) -> None:
    """``serve --ports-file``: write ``{"gateway": port, "management": port}`` (the bound ports,
    what port 0 in the gateway file became) to ``path`` atomically, so a reader polling for the
    file never sees half of it. Raises OSError when ``path``'s directory is not writable."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"gateway": gateway_port, "management": management_port}) + "\n")
    tmp.replace(path)


def _function_gauges_stored() -> bytes:
    """A worker's ``/metrics`` for the supervisor: stores what it will read from the files."""
    metrics.store_function_gauges()
    return b""


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
        worker: WorkerRole | None = None,
    ):
        self.config = config
        #: Set in a worker process: its index, the shared port, the supervisor's sockets.
        self.worker = worker
        self.schema = schema or load_schema()
        build = functools.partial(build_topology, gateway=config, schema=self.schema)
        self.router = Router({name: build(t) for name, t in topologies.items()})
        self.reloader = TopologyReloader(config.topologies_dir, self.router, topologies, build)
        self.ssl_context = server_ssl_context(config.tls, config.source)
        self.audit = AuditLog(config.audit)
        listener = config.listeners.gateway
        # PROXY protocol: connection → header source address, filled by ProxyProtocolListener.
        self.client_addresses = ClientAddresses(
            listener.trusted_proxies, {} if listener.proxy_protocol else None
        )
        self._proxy_listener: ProxyProtocolListener | None = None
        self.draining = False
        self._gateway_runner: web.ServerRunner | None = None
        self._management_runner: web.AppRunner | None = None
        self._reload_task: asyncio.Task | None = None
        self.gateway_port = self.management_port = 0

    def gateway_server(self) -> web.Server:
        """aiohttp's low-level server with the :class:`GatewayHandler` as its only handler.

        The handler routes ``/gateway/{topology}/{service path}`` itself (404 otherwise) and
        enforces the body limit (413), so aiohttp's application layer (URL dispatcher,
        middlewares, ``client_max_size``) would only add work to every request.
        """
        limits = self.config.limits
        observers = (RequestMetrics(frozenset(self.schema.methods)), AuditTrail(self.audit))
        handler = GatewayHandler(self.router, observers, self.client_addresses)
        # auto_decompress off: a body's Content-Encoding is refused by the kinds, never inflated
        # here (aiohttp would inflate it before any limit, and fail noisily on a bad one)
        options = dict(access_log=None, keepalive_timeout=limits.client_idle_timeout_seconds,
                       auto_decompress=False)
        peers = self.client_addresses.proxied_peers
        if peers is not None:
            return _ProxiedGatewayServer(handler, proxied_peers=peers, **options)
        return _GatewayServer(handler, **options)

    async def readiness(self) -> list[str]:
        """Empty when an upstream HMS answers a Thrift call, else what failed for every service.

        One answering service is enough: a pod whose other upstreams are down still serves the
        services that work, and stays in the Kubernetes Service. Draining is never ready.
        """
        if self.draining:
            return ["shutting down"]

        async def probe(service) -> str | None:
            try:
                async with asyncio.timeout(_PROBE_TIMEOUT_SECONDS):
                    await service.upstream.call(_PROBE, origin=metrics.ORIGIN_GATEWAY)
                return None
            except (UpstreamError, TimeoutError) as exc:
                return f"{service.topology}/{service.path}: {exc or 'timeout'}"

        results = await asyncio.gather(
            *(probe(s) for s in self.router.services() if s.upstream is not None)
        )
        return [] if None in results else [r for r in results if r]

    async def start(self) -> None:
        listeners, limits = self.config.listeners, self.config.limits
        gw = web.ServerRunner(self.gateway_server(), shutdown_timeout=self.config.shutdown.grace_seconds)
        await gw.setup()
        self._gateway_runner = gw  # stop() releases it, also when a bind below fails
        # aiohttp has no public hook for a header deadline; wrap its protocol factory.
        gw._server = _HeaderDeadline(gw._server, limits.client_header_timeout_seconds,
                                     self.worker.index if self.worker else 0)
        port = listeners.gateway.port if self.worker is None else self.worker.port
        if listeners.gateway.proxy_protocol:
            # The PROXY header comes in plaintext before TLS: this listener reads it first.
            self._proxy_listener = ProxyProtocolListener(
                self.client_addresses.proxied_peers, gw._server, self.ssl_context,
                self.client_addresses.trusted,
                limits.client_header_timeout_seconds,
            )
            with listening("gateway", listeners.gateway.host, port):
                self.gateway_port = await self._proxy_listener.start(
                    listeners.gateway.host, port, reuse_port=self.worker is not None
                )
        else:
            with listening("gateway", listeners.gateway.host, port):
                await web.TCPSite(
                    gw, listeners.gateway.host, port, ssl_context=self.ssl_context,
                    reuse_port=self.worker is not None,  # the kernel spreads connections over workers
                ).start()
            self.gateway_port = gw.addresses[0][1]
        app = (management_app(self.readiness) if self.worker is None
               else management_app(self.readiness, _function_gauges_stored))
        mgmt = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await mgmt.setup()
        self._management_runner = mgmt
        if self.worker is None:
            with listening("management", listeners.management.host, listeners.management.port):
                await web.TCPSite(mgmt, listeners.management.host, listeners.management.port).start()
            self.management_port = mgmt.addresses[0][1]
        else:  # for the supervisor's /readyz
            await web.UnixSite(mgmt, str(self.worker.management_socket)).start()
        expiry = certificate_not_after(self.config.tls.certificate)
        metrics.CERTIFICATE_EXPIRY.labels(listener="gateway").set(expiry.timestamp())
        await self.router.start()
        self._reload_task = asyncio.get_running_loop().create_task(
            self.reloader.run(self.config.reload.interval_seconds)
        )
        log.info(
            "gateway listening on https://%s:%d, management on http://%s:%d",
            listeners.gateway.host, self.gateway_port, listeners.management.host, self.management_port,
        )
        log.info("Thrift translation: %s implementation", thrift_accel.implementation())
        # What start-up built (modules, the IDL's classes, topologies) lives as long as the
        # process: out of the collector's sight, a full collection scans only what requests
        # allocate (about 40 ms less per full collection, a request-latency spike otherwise).
        gc.collect()
        gc.freeze()

    async def reload(self) -> None:
        """Re-read every topology file now (``SIGHUP``)."""
        await self.reloader.reload(force=True)

    async def stop(self) -> None:
        """Drain and release everything; see the module docstring for the order."""
        self.draining = True
        if self._reload_task is not None:
            self._reload_task.cancel()
        delay = self.config.shutdown.drain_delay_seconds
        if delay and self._gateway_runner is not None:
            log.info("draining: unready for %g s before closing the listener", delay)
            await asyncio.sleep(delay)
        if self._proxy_listener is not None:
            await self._proxy_listener.stop()
            self._proxy_listener = None
        if self._gateway_runner is not None:
            await self._gateway_runner.cleanup()  # stop accepting; wait for in-flight requests
            self._gateway_runner = None
        await self.router.close()
        self.audit.close()
        if self._management_runner is not None:
            await self._management_runner.cleanup()
            self._management_runner = None


def run(gateway: Gateway, on_started: Callable[[Gateway], None] | None = None) -> None:
    """Serve ``gateway`` on uvloop's event loop until SIGINT or SIGTERM (see
    :func:`run_until_signalled`).

    uvloop (libuv) runs the loop, sockets and TLS in compiled code; asyncio's own loop does
    them in Python, which costs every request a measurable share of its time
    (docs/performance.md).
    """
    uvloop.run(run_until_signalled(gateway, on_started))


async def run_until_signalled(
    gateway: Gateway, on_started: Callable[[Gateway], None] | None = None
) -> None:
    """Start ``gateway``, call ``on_started(gateway)``, serve until SIGINT or SIGTERM, stop.

    SIGHUP reloads the topologies without stopping.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(gateway.reload()))
    try:
        await gateway.start()
    except BaseException:  # a listener could not bind: release what was set up
        await gateway.stop()
        raise
    try:
        if on_started:
            on_started(gateway)
        await stop.wait()
    finally:
        log.info("stopping")
        await gateway.stop()
