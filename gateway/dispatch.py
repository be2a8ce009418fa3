"""One request's path: route → authentication → identity assertion → authorization
→ Thrift decode → dispatch to upstream → encode.

Status codes (MS-HMSHTTP 3.1.5 and the gateway's own contract):

* 200 with a TJSON REPLY, or a TJSON EXCEPTION (``TApplicationException``) for a method the
  service does not expose;
* 400 malformed TJSON, 401 no valid credentials (every challenge of the topology), 403 denied
  by identity assertion or authorization, 404 unknown topology or service, 405 not POST,
  413 body over the limit;
* 502 upstream unreachable or its reply malformed, 504 upstream too slow.

Error bodies are one line of plain text; no credentials or payloads are logged.
"""

from __future__ import annotations

import logging
import struct
import time

from aiohttp import hdrs, web

from gateway.observability import metrics
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.codec import Codec, detect_codec
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema
from gateway.thrift.translate import UNKNOWN_METHOD
from gateway.topology import Router, Service, Topology
from gateway.upstream.errors import UpstreamError, UpstreamTimeout

log = logging.getLogger(__name__)

_ONEWAY = 4
_REPLY, _EXCEPTION = 2, 3


class _Outcome(Exception):
    """A response decided before the end of the pipeline, with the metrics outcome it counts as."""

    def __init__(self, response: web.StreamResponse, outcome: str):
        self.response, self.outcome = response, outcome


def _text(status: int, reason: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=reason + "\n", headers=headers)


def reply_outcome(message: bytes) -> str:
    """``ok`` for a REPLY whose result is field 0 (success) or void, else ``exception``.

    Reads only the strict-binary message header and the first field header of the result
    struct (Thrift: a result struct carries field 0 for success, 1..n for declared exceptions).
    """
    try:
        mtype = message[3]
        (name_len,) = struct.unpack_from("!i", message, 4)
        pos = 8 + name_len + 4
        if mtype != _REPLY:
            return "exception"
        ftype = message[pos]
        if ftype == 0:  # STOP: a void method's success
            return "ok"
        (fid,) = struct.unpack_from("!h", message, pos + 1)
        return "ok" if fid == 0 else "exception"
    except (IndexError, struct.error):
        return "exception"


class Dispatcher:
    """The aiohttp handler for ``/gateway/{topology}/{path}``."""

    def __init__(self, router: Router, schema: ServiceSchema, max_request_bytes: int):
        self.router = router
        self.schema = schema
        self.max_request_bytes = max_request_bytes
        self.known_methods = frozenset(schema.methods)

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        route = self.router.resolve(request.match_info["topology"], request.match_info["path"])
        if route is None:
            return _text(404, "no such topology or service")
        topology, service = route
        method = "unknown"
        try:
            response, method, outcome = await self._handle(request, topology, service)
        except _Outcome as early:
            response, outcome = early.response, early.outcome
        label = metrics.method_label(method, self.known_methods) if method != "unknown" else "other"
        metrics.REQUESTS.labels(topology.name, service.path, label, outcome).inc()
        metrics.REQUEST_DURATION.labels(topology.name, service.path, label).observe(
            time.perf_counter() - started
        )
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
        metrics.REQUEST_BYTES.labels(topology.name, service.path).inc(len(body))

        try:
            codec = detect_codec(body, request.content_type)
            header, call = codec.decode_call(body, self.schema)
        except ProtocolError as exc:
            log.info("400 %s/%s from %s: %s", topology.name, service.path, request.remote, exc.reason)
            raise _Outcome(_text(400, f"malformed Thrift message: {exc.reason}"), "bad_request")

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

        oneway = header.type == _ONEWAY
        try:
            reply = await service.upstream.call(call, expect_reply=not oneway, identity=identity)
        except UpstreamError as exc:
            log.warning("%d %s/%s %s: %s", exc.status, topology.name, service.path, header.name, exc)
            outcome = "upstream_timeout" if isinstance(exc, UpstreamTimeout) else "upstream_unavailable"
            return _text(exc.status, str(exc)), header.name, outcome
        if reply is None:
            return web.Response(status=200), header.name, "ok"
        try:
            body_out = codec.encode_reply(reply, self.schema, header.seqid)
        except ProtocolError as exc:
            log.warning("502 %s/%s %s: bad upstream reply: %s",
                        topology.name, service.path, header.name, exc.reason)
            return (_text(502, f"upstream sent a malformed reply: {exc.reason}"),
                    header.name, "upstream_unavailable")
        return self._reply(body_out, codec, topology, service), header.name, reply_outcome(reply)

    @staticmethod
    def _assert_identity(
        request: web.Request, topology: Topology, service: Service, principal: Principal
    ) -> Identity:
        try:
            identity = topology.identity.assert_identity(principal, request)
        except PermissionError as exc:
            log.info("403 %s: identity assertion refused %s: %s", topology.name, principal.name, exc)
            raise _Outcome(_text(403, f"forbidden: {exc}"), "forbidden")
        reason = service.authorizer.deny_reason(identity, request.remote)
        if reason is not None:
            log.info("403 %s/%s: %s denied: %s", topology.name, service.path, identity.user, reason)
            raise _Outcome(_text(403, f"forbidden: {reason}"), "forbidden")
        return identity

    def _too_large(self) -> web.Response:
        return _text(413, f"request body larger than {self.max_request_bytes} bytes")

    async def _authenticate(self, request: web.Request, topology: Topology) -> Principal:
        for provider in topology.authentication:
            principal = await provider.authenticate(request)
            outcome = "success" if principal else "failure"
            if principal is not None or request.headers.get(hdrs.AUTHORIZATION):
                metrics.AUTHENTICATION.labels(topology.name, provider.name, outcome).inc()
            if principal is not None:
                return principal
        log.info("401 %s from %s", topology.name, request.remote)
        response = _text(401, "authentication required")
        for challenge in topology.challenges():
            response.headers.add(hdrs.WWW_AUTHENTICATE, challenge)
        raise _Outcome(response, "unauthenticated")

    async def _read_body(self, request: web.Request) -> bytes:
        # Chunked bodies have no Content-Length: count while reading and stop at the limit.
        chunks, size = [], 0
        async for chunk in request.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > self.max_request_bytes:
                raise _Outcome(self._too_large(), "too_large")
            chunks.append(chunk)
        return b"".join(chunks)

    @staticmethod
    def _reply(body: bytes, codec: Codec, topology: Topology, service: Service) -> web.Response:
        metrics.RESPONSE_BYTES.labels(topology.name, service.path).inc(len(body))
        return web.Response(body=body, content_type=codec.content_type)
