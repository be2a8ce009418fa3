"""One request's state as it moves through the pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.observability.audit import AuditEvent
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import MessageHeader

if TYPE_CHECKING:
    from gateway.thrift.codec import Codec
    from gateway.topology import Service, Topology


@dataclass(slots=True, eq=False)
class Exchange:
    """What is known about one request: set by the dispatcher (``request`` … ``event``), then by
    steps (``principal``, ``identity``) and the service kind (``codec``, ``header``, ``call``).

    ``call`` is the strict-binary message that goes upstream; request-side steps may replace it.
    """

    request: web.BaseRequest
    topology: "Topology"
    service: "Service"
    event: AuditEvent
    principal: Principal | None = None
    identity: Identity | None = None
    codec: "Codec | None" = None
    header: MessageHeader | None = None
    call: bytes = b""
