"""Calls to the upstream Hive Metastore as thriftpy2 objects, made as the caller: each call is a
strict-binary ``CALL`` built from the IDL (:mod:`gateway.thrift.schema`), sent through the
service's :class:`~gateway.upstream.failover.Upstream` with the caller's identity (``set_ugi``
or ``x-actor-username``, as for the Thrift API), and its ``REPLY`` decoded back.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

from gateway.pipeline.thrift_objects import decode_struct, encode_reply, lenient_class
from gateway.providers.identity import Identity
from gateway.thrift.binary import CALL, EXCEPTION, read_reply_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema


class HmsException(Exception):
    """HMS answered with one of the method's declared exceptions (``NoSuchObjectException``,
    ``MetaException``…): ``name`` its IDL name, ``message`` its text."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name, self.message = name, message


class HmsFailed(Exception):
    """HMS answered a ``TApplicationException``, or a reply that does not decode."""


class Undecodable(HmsFailed):
    """A reply that does not decode with the IDL's classes."""


class Metastore(Protocol):
    """What the Glue operations need of HMS (a fake in unit tests)."""

    async def call(self, method: str, **args: Any) -> Any:
        """The success value of ``method(**args)``.

        Raises :class:`HmsException`, :class:`HmsFailed`, or an ``UpstreamError``."""
        ...


_seqids = itertools.count(1)


def encode_call(schema: ServiceSchema, method: str, args: dict[str, Any], seqid: int) -> bytes:
    """A strict-binary ``CALL`` of ``method`` with ``args`` (argument name → value, thriftpy2
    objects for structs). Raises ``KeyError`` for a method the IDL does not have."""
    call_args = schema.methods[method].args_class(**args)  # type: ignore[misc]
    message = bytearray(encode_reply(method, seqid, call_args))
    message[3] = CALL  # the strict header's last byte is the message type
    return bytes(message)


def decode_reply(result_class: type, method: str, reply: bytes) -> Any:
    """The success value of a strict-binary reply to ``method`` (None for ``void``), read as
    ``result_class`` (thriftpy2's ``<method>_result``).

    Raises :class:`HmsException` for a declared exception, :class:`HmsFailed` for a
    ``TApplicationException``, :class:`Undecodable` for bytes that do not decode."""
    try:
        header, _ = read_reply_header(reply)
        if header.type == EXCEPTION:
            raise HmsFailed(f"{method}: HMS answered a TApplicationException")
        result = decode_struct(reply, result_class)
    except ProtocolError as exc:
        raise Undecodable(f"{method}: reply does not decode: {exc.reason}") from None
    spec = type(result).thrift_spec
    for fid, entry in sorted(spec.items()):
        value = getattr(result, entry[1])
        if fid != 0 and value is not None:
            raise HmsException(type(value).__name__, getattr(value, "message", None) or "")
    return getattr(result, "success", None)


class UpstreamMetastore:
    """:class:`Metastore` over an ``Upstream`` (read-only calls: retried on another HMS)."""

    def __init__(self, upstream, schema: ServiceSchema, identity: Identity | None):
        self.upstream, self.schema, self.identity = upstream, schema, identity

    async def call(self, method: str, **args: Any) -> Any:
        message = encode_call(self.schema, method, args, next(_seqids) & 0x7FFFFFFF)
        reply = await self.upstream.call(message, identity=self.identity, read_only=True)
        try:
            return decode_reply(self.schema.methods[method].result_class, method, reply)  # type: ignore[arg-type]
        except Undecodable:
            # a list-bucketed table: read without SkewedInfo's location map (no
            # SkewedColumnValueLocationMaps in the Glue shape), see thrift_objects.lenient_class
            return decode_reply(lenient_class(self.schema.methods[method].result_class), method, reply)

