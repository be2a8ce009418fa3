"""The gateway listener's one handler: route ``/gateway/{topology}/{service path}`` to a
service, admit it, let the service's kind serve it through its step chain, turn an outcome that
ended it early into its response (:mod:`gateway.pipeline.outcomes`, one table of statuses), send
it, and only then let the observers (metrics, audit) see it: the client does not wait for the
bookkeeping (docs/performance.md, issue 14).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

from aiohttp import HttpVersion10, HttpVersion11, hdrs, web

from gateway.client_address import ClientAddresses
from gateway.observability.audit import AuditEvent, audit_event
from gateway.observability.log_format import REQUEST_ID
from gateway.observability.observers import Observer
from gateway.pipeline.exchange import Exchange, response_headers
from gateway.http_checks import repeated_header
from gateway.pipeline.outcomes import BadRequest, NotFound, Outcome, Overloaded, VersionNotSupported, response_for
from gateway.providers.authentication.throttle import Throttled
from gateway.thrift.errors import ProtocolError
from gateway.topology import Router, Service, Topology
from gateway.upstream.errors import UpstreamError

log = logging.getLogger(__name__)

_PREFIX = "/gateway/"
_HTTP_VERSIONS = frozenset({HttpVersion10, HttpVersion11})
#: What ends a request early; each has its row in ``gateway.pipeline.outcomes.STATUSES``.
_ENDINGS = (Outcome, ProtocolError, Throttled, UpstreamError)


class GatewayHandler:
    """The aiohttp handler of the gateway listener: every request.

    ``client_addresses`` resolves each request's client address once (trusted proxies);
    ``observers`` see every response with its outcome, in order, once it has been sent (a
    response the service streamed was sent by the service). Every response echoes the request
    id (``X-Request-Id``).
    """

    def __init__(self, router: Router, observers: Sequence[Observer] = (),
                 client_addresses: ClientAddresses | None = None):
        self.router = router
        self.observers = tuple(observers)
        self.client_addresses = client_addresses or ClientAddresses()

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        self.client_addresses(request)  # once; client_address(request) reads it from here on
        event = audit_event(request)
        REQUEST_ID.set(event.request_id)
        try:
            response, outcome = await self._serve(request, event)
        except _ENDINGS as ending:
            response, outcome = response_for(ending)
            if isinstance(ending, VersionNotSupported):
                # aiohttp writes the status line with the request's version (a reified property,
                # cached in _cache) and has no public way to change it; RFC 9112 §2.3: HTTP/1.1.
                request._cache["version"] = HttpVersion11  # type: ignore[attr-defined]
                response.force_close()
        if not response.prepared:
            response.headers.extend(response_headers(request, event.request_id))
            try:
                await response.prepare(request)
                await response.write_eof()
            except ConnectionError:  # aiohttp's own write_eof after the handler sees it too and closes
                event.reason = event.reason or "client went away before the response was sent"
        for observer in self.observers:
            observer.on_response(event, response, outcome)
        return response

    async def _serve(self, request: web.BaseRequest, event: AuditEvent) -> tuple[web.StreamResponse, str]:
        if request.version not in _HTTP_VERSIONS:
            raise VersionNotSupported("HTTP version not supported: use HTTP/1.1")
        repeated = repeated_header(request.headers)
        if repeated is not None:  # readers taking the first or the last would disagree
            raise BadRequest(f"more than one {repeated} header")
        route = self._route(request.raw_path)
        if route is None:
            raise NotFound("no such topology or service")
        topology, service = route
        event.topology, event.service = topology.name, service.path
        if not service.limiter.try_acquire():
            raise Overloaded("too many requests in flight", {hdrs.RETRY_AFTER: "1"})
        try:
            # a kind may carry more per request (hms-thrift: the call), in its own exchange type
            exchange_type = getattr(service.handler, "exchange_type", Exchange)
            return await service.handler.handle(exchange_type(request, event))
        finally:
            service.limiter.release()

    def _route(self, target: str) -> tuple[Topology, Service] | None:
        """``/gateway/{topology}/{service path}`` → the topology and service, else None (404).

        One strict rule: the request target's path, as sent (never percent-decoded or
        normalised), must be exactly a configured ``/gateway/{topology}/{service path}``: a
        trailing slash, an empty or dot segment or a percent-encoded character is another path.
        The absolute form (``https://host/gateway/...``, RFC 9112 §3.2.2) is read for its path;
        the query string is ignored.
        """
        if not target.startswith("/"):
            target = urlsplit(target).path  # absolute form
        path = target.partition("?")[0]
        if not path.startswith(_PREFIX):
            return None
        topology, _, service_path = path[len(_PREFIX):].partition("/")
        return self.router.resolve(topology, service_path) if service_path else None
