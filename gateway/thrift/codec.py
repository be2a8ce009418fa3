"""Client-side protocols: how a request body is read and its reply written.

The body's first byte tells the protocol (``[`` TJSON, ``0x80`` strict binary, ``0x82``
compact); ``Content-Type`` is only a hint, since clients disagree on it (Python's THttpClient
sends ``application/x-thrift`` with JSON bodies). Upstream HMS always speaks strict binary.
"""

from __future__ import annotations

from typing import Protocol

from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema
from gateway.thrift.translate import (
    MessageHeader,
    binary_reply_to_tjson,
    tapplication_exception_tjson,
    tjson_call_to_binary,
)


class Codec(Protocol):
    """One client protocol: decode a CALL to strict binary, encode a strict-binary reply back."""

    name: str
    content_type: str

    def decode_call(self, body: bytes, schema: ServiceSchema) -> tuple[MessageHeader, bytes]:
        """Header and strict-binary CALL/ONEWAY message. Raises ``ProtocolError`` (→ 400)."""
        ...

    def encode_reply(self, message: bytes, schema: ServiceSchema, seqid: int) -> bytes:
        """The client's form of a strict-binary REPLY/EXCEPTION. Raises ``ProtocolError``."""
        ...

    def application_exception(self, name: str, seqid: int, message: str, type_code: int) -> bytes:
        """An EXCEPTION message carrying ``TApplicationException`` in the client's protocol."""
        ...


class TJSONCodec:
    """Apache Thrift TJSONProtocol, the protocol of MS-HMSHTTP."""

    name = "tjson"
    content_type = "application/vnd.apache.thrift.json"

    def decode_call(self, body: bytes, schema: ServiceSchema) -> tuple[MessageHeader, bytes]:
        return tjson_call_to_binary(body, schema)

    def encode_reply(self, message: bytes, schema: ServiceSchema, seqid: int) -> bytes:
        return binary_reply_to_tjson(message, schema, seqid=seqid)

    def application_exception(self, name: str, seqid: int, message: str, type_code: int) -> bytes:
        return tapplication_exception_tjson(name, seqid, message, type_code)


TJSON = TJSONCodec()
_BY_FIRST_BYTE: dict[int, Codec] = {ord("["): TJSON}


def detect_codec(body: bytes, content_type: str | None = None) -> Codec:
    """The codec for ``body``, chosen by its first non-blank byte.

    Raises ``ProtocolError`` when no supported protocol starts that way.
    """
    start = body.lstrip(b" \t\r\n")[:1]
    codec = _BY_FIRST_BYTE.get(start[0]) if start else None
    if codec is None:
        raise ProtocolError("body is not a TJSON message (it must start with '[')")
    return codec
