"""One request's state as it moves through the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web
from multidict import CIMultiDict

from gateway.observability.audit import REQUEST_ID_HEADER, AuditEvent
from gateway.providers.authentication.base import RESPONSE_HEADERS, Principal
from gateway.providers.identity import Identity


def response_headers(request: web.BaseRequest, request_id: str) -> CIMultiDict[str]:
    """The headers every response of the gateway listener carries, to be set before it is sent:
    those the authentication providers left for it (``add_response_header``: SPNEGO's
    mutual-authentication token, a session ``Set-Cookie``; names may repeat) and the request id
    (``X-Request-Id``). The gateway handler adds them to what it sends; a service that sends its
    response itself (a streamed reply, an event stream) uses :meth:`Exchange.response_headers`."""
    headers: CIMultiDict[str] = CIMultiDict(request.get(RESPONSE_HEADERS, ()))
    headers[REQUEST_ID_HEADER] = request_id
    return headers


@dataclass(slots=True, eq=False)
class Exchange:
    """What is known about one request, whatever its kind: set by the gateway handler
    (``request``, ``event``: the audit event, which names the topology and service), then by
    the request-side steps (``principal``, ``identity``). ``view`` is the caller's
    :class:`~gateway.policy.view.CatalogView` for this request, built once by the kind or step
    that judges catalog access, so its per-request decisions serve every later hook.

    A kind whose requests carry more (the Thrift call:
    :class:`gateway.hms_thrift.exchange.ThriftExchange`) names its subclass as its
    ``exchange_type``; the gateway handler builds that one.
    """

    request: web.BaseRequest
    event: AuditEvent
    principal: Principal | None = None
    identity: Identity | None = None
    view: object | None = None

    def response_headers(self) -> CIMultiDict[str]:
        """:func:`response_headers` of this request."""
        return response_headers(self.request, self.event.request_id)

