"""One request's path: route → authentication → identity assertion → authorization
→ Thrift decode → dispatch to upstream → encode.

Status codes (MS-HMSHTTP 3.1.5 and the gateway's own contract):

* 200 with a TJSON REPLY, or a TJSON EXCEPTION (``TApplicationException``) for a method the
  service does not expose;
* 400 malformed TJSON, 401 no valid credentials (every challenge of the topology), 403 denied
  by identity assertion or authorization, 404 unknown topology or service, 405 not POST,
  413 body over the limit, 429 too many failed authentications from one address
  (``Retry-After``);
* 408 body not received within ``limits.client_body_timeout_seconds``;
* 502 upstream unreachable or its reply malformed, 503 (``Retry-After``) the service's
  ``max_concurrent_requests`` reached, 504 upstream too slow.

Error bodies are one line of plain text; no credentials or payloads are logged.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from urllib.parse import urlsplit

from aiohttp import HttpVersion10, HttpVersion11, hdrs, web

from gateway.client_address import ClientAddresses, client_address
from gateway.config import Limits
from gateway.observability import metrics
from gateway.observability.log_format import REQUEST_ID
from gateway.observability.audit import (
    REQUEST_ID_HEADER,
    AuditEvent,
    AuditLog,
    begin,
    call_objects,
    event_of,
)
from gateway.providers.authentication.base import RESPONSE_HEADERS, Principal, well_formed
from gateway.providers.authentication.throttle import THROTTLE, Throttled
from gateway.providers.identity import Identity
from gateway.providers.ownership import OwnerAssertion
from gateway.thrift.codec import Codec, detect_codec
from gateway.thrift.binary import I16, ONEWAY, REPLY, read_message_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema, TType
from gateway.thrift.streaming import reply_translator
from gateway.thrift.translate import UNKNOWN_METHOD
from gateway.topology import Router, Service, Topology
from gateway.upstream.errors import UpstreamError, UpstreamTimeout
from gateway.upstream.failover import is_read_only
from gateway.upstream.streaming import ClientGone, ReplySink, StreamBroken

log = logging.getLogger(__name__)

_PREFIX = "/gateway/"
_HTTP_VERSIONS = frozenset({HttpVersion10, HttpVersion11})


class _Outcome(Exception):
    """A response decided before the end of the pipeline, with the metrics outcome it counts as."""

    def __init__(self, response: web.StreamResponse, outcome: str):
        self.response, self.outcome = response, outcome


def _text(status: int, reason: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=reason + "\n", headers=headers)


def _version_not_supported(request: web.BaseRequest) -> web.Response:
    """505 (RFC 9110 §15.6.6) for a request line claiming HTTP/2 or later, which this HTTP/1
    listener cannot speak; answered as HTTP/1.1 (RFC 9112 §2.3) and the connection closed."""
    # aiohttp writes the status line with the request's version (a reified property, cached in
    # _cache) and has no public way to change it.
    request._cache["version"] = HttpVersion11  # type: ignore[attr-defined]
    response = _text(505, "HTTP version not supported: use HTTP/1.1")
    response.force_close()
    return response


def reply_outcome(message: bytes) -> str:
    """``ok`` for a REPLY whose result is field 0 (success) or void, else ``exception``.

    Reads only the strict-binary message header and the first field header of the result
    struct (Thrift: a result struct carries field 0 for success, 1..n for declared exceptions).
    """
    try:
        header, pos = read_message_header(message)
        if header.type != REPLY:
            return "exception"
        if message[pos] == TType.STOP:  # a void method's success
            return "ok"
        (fid,) = I16.unpack_from(message, pos + 1)
    except (ProtocolError, IndexError, struct.error):
        return "exception"
    return "ok" if fid == 0 else "exception"


class Dispatcher:
    """The aiohttp handler of the gateway listener: every request, ``/gateway/{topology}/{path}``."""

    def __init__(
        self, router: Router, schema: ServiceSchema, limits: Limits, audit: AuditLog | None = None,
        client_addresses: ClientAddresses | None = None,
    ):
        self.router = router
        self.client_addresses = client_addresses or ClientAddresses()
        self.audit = audit
        self.schema = schema
        self.max_request_bytes = limits.max_request_bytes
        self.body_timeout = limits.client_body_timeout_seconds
        self.known_methods = frozenset(schema.methods)
        self.ownership = OwnerAssertion(schema)

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        self.client_addresses(request)  # once; client_address(request) reads it from here on
        event = begin(request)
        REQUEST_ID.set(event.request_id)
        if request.version not in _HTTP_VERSIONS:
            return self._audited(event, _version_not_supported(request), "bad_request")
        route = self._route(request.raw_path)
        if route is None:
            return self._audited(event, _text(404, "no such topology or service"), "not_found")
        topology, service = route
        event.topology, event.service = topology.name, service.path
        method = "unknown"
        if not service.limiter.try_acquire():
            response, outcome = _text(503, "too many requests in flight", **{hdrs.RETRY_AFTER: "1"}), "overloaded"
        else:
            try:
                response, method, outcome = await self._handle(request, topology, service)
            except _Outcome as early:
                response, outcome = early.response, early.outcome
            finally:
                service.limiter.release()
        label = metrics.method_label(method, self.known_methods) if method != "unknown" else "other"
        metrics.child(metrics.REQUESTS, topology.name, service.path, label, outcome).inc()
        metrics.child(metrics.REQUEST_DURATION, topology.name, service.path, label, outcome).observe(
            time.perf_counter() - started
        )
        for name, value in request.get(RESPONSE_HEADERS, ()):
            response.headers.add(name, value)
        return self._audited(event, response, outcome)

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

    def _audited(self, event: AuditEvent, response: web.StreamResponse, outcome: str) -> web.StreamResponse:
        """Echo the request id and write the request's audit line."""
        response.headers[REQUEST_ID_HEADER] = event.request_id
        if self.audit is not None:
            self.audit.write(event, outcome, response.status)
        return response

    async def _handle(
        self, request: web.Request, topology: Topology, service: Service
    ) -> tuple[web.StreamResponse, str, str]:
        if request.method != hdrs.METH_POST:
            raise _Outcome(
                _text(405, "only POST is allowed", **{hdrs.ALLOW: hdrs.METH_POST}), "bad_request"
            )
        if request.content_length is not None and request.content_length > self.max_request_bytes:
            raise _Outcome(self._too_large(), "too_large")

        principal = await self._authenticate(request, topology)
        identity = self._assert_identity(request, topology, service, principal)
        body = await self._read_body(request)
        metrics.child(metrics.REQUEST_BYTES, topology.name, service.path).inc(len(body))

        try:
            codec = detect_codec(body, request.content_type)
            header, call = codec.decode_call(body, self.schema)
        except ProtocolError as exc:
            log.info("400 %s/%s from %s: %s", topology.name, service.path, client_address(request), exc.reason)
            event_of(request).reason = exc.reason
            raise _Outcome(_text(400, f"malformed Thrift message: {exc.reason}"), "bad_request")

        event = event_of(request)
        event.method = header.name
        event.database, event.table = call_objects(call, self.schema)
        if header.name not in service.methods:
            log.info(
                "method %s not exposed by %s/%s (user %s)",
                header.name[:100], topology.name, service.path, identity.user,
            )
            body_out = codec.application_exception(
                header.name, header.seqid,
                f"method {header.name} is not exposed by this service", UNKNOWN_METHOD,
            )
            return self._reply(body_out, codec, topology, service), header.name, "not_exposed"

        try:
            call = self.ownership.apply(call, header.name, identity.user)
        except ProtocolError as exc:
            raise _Outcome(_text(400, f"malformed Thrift message: {exc.reason}"), "bad_request")
        oneway = header.type == ONEWAY  # the codec checked it against the IDL
        sink = None if oneway else self._reply_sink(request, codec, header.seqid)
        try:
            reply = await service.upstream.call(
                call, expect_reply=not oneway, identity=identity,
                read_only=is_read_only(header.name), sink=sink,
            )
        except UpstreamError as exc:
            log.warning("%d %s/%s %s: %s", exc.status, topology.name, service.path, header.name, exc)
            outcome = "upstream_timeout" if isinstance(exc, UpstreamTimeout) else "upstream_unavailable"
            event.reason = str(exc)
            if sink is not None and sink.response is not None:  # reply partly sent: cut it
                sink.abort()
                return sink.response, header.name, outcome
            return _text(exc.status, str(exc)), header.name, outcome
        except (ClientGone, StreamBroken) as exc:
            log.warning("%s/%s %s: reply stream cut: %s", topology.name, service.path, header.name, exc)
            event.reason = str(exc)
            assert sink is not None
            sink.abort()
            return sink.response or _text(502, str(exc)), header.name, "upstream_unavailable"
        if reply is None:
            return web.Response(status=200), header.name, "ok"
        if sink is not None and sink.done:
            try:
                response = await sink.finish()
            except ClientGone as exc:
                log.warning("%s/%s %s: client went away: %s", topology.name, service.path, header.name, exc)
                sink.abort()
                return sink.response, header.name, "upstream_unavailable"  # type: ignore[return-value]
            metrics.child(metrics.RESPONSE_BYTES, topology.name, service.path).inc(sink.sent)
            return response, header.name, reply_outcome(reply)
        try:
            body_out = codec.encode_reply(reply, self.schema, header.seqid)
        except ProtocolError as exc:
            log.warning("502 %s/%s %s: bad upstream reply: %s",
                        topology.name, service.path, header.name, exc.reason)
            return (_text(502, f"upstream sent a malformed reply: {exc.reason}"),
                    header.name, "upstream_unavailable")
        return self._reply(body_out, codec, topology, service), header.name, reply_outcome(reply)

    def _reply_sink(self, request: web.Request, codec: Codec, seqid: int) -> ReplySink | None:
        """A sink that streams the TJSON translation of the reply (:mod:`gateway.upstream.streaming`);
        other codecs get the whole reply."""
        if codec.name != "tjson":
            return None
        event = event_of(request)

        def prepare(response: web.StreamResponse) -> None:
            for name, value in request.get(RESPONSE_HEADERS, ()):
                response.headers.add(name, value)
            response.headers[REQUEST_ID_HEADER] = event.request_id

        return ReplySink(
            request, lambda max_bytes: reply_translator(self.schema, max_bytes, seqid),
            codec.content_type, prepare,
        )

    @staticmethod
    def _assert_identity(
        request: web.Request, topology: Topology, service: Service, principal: Principal
    ) -> Identity:
        event = event_of(request)
        event.user = principal.name
        try:
            identity = topology.identity.assert_identity(principal, request)
        except PermissionError as exc:
            log.info("403 %s: identity assertion refused %s: %s", topology.name, principal.name, exc)
            event.reason = str(exc)
            raise _Outcome(_text(403, f"forbidden: {exc}"), "forbidden")
        event.effective_user, event.impersonator = identity.user, identity.impersonator
        reason = service.authorizer.deny_reason(identity, client_address(request))
        if reason is not None:
            event.reason = reason
            log.info("403 %s/%s: %s denied: %s", topology.name, service.path, identity.user, reason)
            raise _Outcome(_text(403, f"forbidden: {reason}"), "forbidden")
        return identity

    def _too_large(self) -> web.Response:
        return _text(413, f"request body larger than {self.max_request_bytes} bytes")

    async def _authenticate(self, request: web.Request, topology: Topology) -> Principal:
        if topology.throttle is not None:
            request[THROTTLE] = topology.throttle  # providers' password checks spend its budget
        try:
            for provider in topology.authentication:
                principal = await provider.authenticate(request)
                if principal is not None and not well_formed(principal):
                    log.info("401 %s: %s gave a user or group name that is empty, not UTF-8 or "
                             "holds control characters", topology.name, provider.name)
                    principal = None
                outcome = "success" if principal else "failure"
                if principal is not None or request.headers.get(hdrs.AUTHORIZATION):
                    metrics.child(metrics.AUTHENTICATION, topology.name, provider.name, outcome).inc()
                if principal is not None:
                    return principal
        except Throttled as exc:
            log.warning("429 %s: password checks from %s refused: too many failures",
                        topology.name, client_address(request))
            raise _Outcome(
                _text(429, "too many failed authentications", **{hdrs.RETRY_AFTER: str(exc.retry_after)}),
                "throttled",
            ) from None
        log.info("401 %s from %s", topology.name, client_address(request))
        response = _text(401, "authentication required")
        for challenge in topology.challenges():
            response.headers.add(hdrs.WWW_AUTHENTICATE, challenge)
        raise _Outcome(response, "unauthenticated")

    async def _read_body(self, request: web.Request) -> bytes:
        content = request.content
        if content.is_eof():  # the whole body came with the headers (the usual case): no timer
            body = content.read_nowait()
            if len(body) > self.max_request_bytes:
                raise _Outcome(self._too_large(), "too_large")
            return body
        # Chunked bodies have no Content-Length: count while reading and stop at the limit.
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in content.iter_chunked(64 * 1024):
                    size += len(chunk)
                    if size > self.max_request_bytes:
                        raise _Outcome(self._too_large(), "too_large")
                    chunks.append(chunk)
        except TimeoutError:
            raise _Outcome(_text(408, "request body not received in time"), "bad_request") from None
        return b"".join(chunks)

    @staticmethod
    def _reply(body: bytes, codec: Codec, topology: Topology, service: Service) -> web.Response:
        metrics.child(metrics.RESPONSE_BYTES, topology.name, service.path).inc(len(body))
        return web.Response(body=body, content_type=codec.content_type)
