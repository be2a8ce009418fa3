"""One ``hms-thrift`` request's state: the shared :class:`~gateway.pipeline.exchange.Exchange`
plus the Thrift call it carries, which the kind sets once it has decoded the body and the
call-side and reply-side steps read (and may replace)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.pipeline.exchange import Exchange
from gateway.thrift.binary import MessageHeader
from gateway.thrift.objects import decode_args

if TYPE_CHECKING:
    from gateway.thrift.codec import Codec
    from gateway.thrift.schema import MethodSchema
    from gateway.upstream.metastore import MetastoreClient


def call_args(exchange: "ThriftExchange", method: "MethodSchema"):
    """The arguments of ``exchange.call`` (thriftpy2 ``<method>_args``), decoded once per
    request and kept on ``exchange.args`` for every step and the metadata cache. Raises
    ``ProtocolError`` when they do not decode."""
    if exchange.args is None:
        exchange.args = decode_args(exchange.call, method)
    return exchange.args


@dataclass(slots=True, eq=False)
class ThriftExchange(Exchange):
    """An :class:`Exchange` with the call set by the ``hms-thrift`` kind: ``codec`` the
    client's protocol, ``header`` the call's message header, ``call`` the strict-binary message
    that goes upstream (call-side steps may replace it).

    ``metastore`` is the service's own client of its HMS list, set by the kind.

    ``args`` is ``call``'s arguments as thriftpy2 objects, decoded once by the first step that
    needs them (catalog policy, the metadata cache: :func:`call_args`) and kept for the
    request's later hooks; None until then, and set back to None by a step that replaces
    ``call``.
    """

    codec: "Codec | None" = None
    header: MessageHeader | None = None
    call: bytes = b""
    args: object | None = None
    #: The service's :class:`~gateway.upstream.metastore.MetastoreClient`, for a call-side step
    #: that reads what a call would change (the url rule of
    #: :mod:`gateway.hms_thrift.steps.placing`); None outside the kind.
    metastore: "MetastoreClient | None" = None

    #: :func:`call_args` of this exchange (what the metadata cache asks of a proxied call).
    arguments = call_args
