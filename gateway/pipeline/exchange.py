"""One request's state as it moves through the pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from multidict import CIMultiDict

from gateway.observability.audit import REQUEST_ID_HEADER, AuditEvent
from gateway.providers.authentication.base import RESPONSE_HEADERS, Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import MessageHeader
from gateway.thrift.objects import decode_args

if TYPE_CHECKING:
    from gateway.thrift.codec import Codec
    from gateway.thrift.schema import MethodSchema


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
    """What is known about one request: set by the gateway handler (``request``, ``event``:
    the audit event, which names the topology and service), then by steps (``principal``,
    ``identity``) and the service kind (``codec``, ``header``, ``call``).

    ``call`` is the strict-binary message that goes upstream; request-side steps may replace it.
    ``args`` is ``call``'s arguments as thriftpy2 objects, decoded once by the first step that
    needs them (catalog policy) and kept for the request's later hooks; None until then, and
    set back to None by a step that replaces ``call``. ``view`` is the caller's
    :class:`~gateway.policy.view.CatalogView` for this request, built once by the catalog policy
    step, so its per-request decisions serve every later hook.
    """

    request: web.BaseRequest
    event: AuditEvent
    principal: Principal | None = None
    identity: Identity | None = None
    codec: "Codec | None" = None
    header: MessageHeader | None = None
    call: bytes = b""
    args: object | None = None
    view: object | None = None

    def response_headers(self) -> CIMultiDict[str]:
        """:func:`response_headers` of this request."""
        return response_headers(self.request, self.event.request_id)


def call_args(exchange: Exchange, method: "MethodSchema"):
    """The arguments of ``exchange.call`` (thriftpy2 ``<method>_args``), decoded once per
    request and kept on ``exchange.args`` for every step and the metadata cache. Raises
    ``ProtocolError`` when they do not decode."""
    if exchange.args is None:
        exchange.args = decode_args(exchange.call, method)
    return exchange.args
