"""Client-side protocols: how a request body is read and its reply written.

The body's first byte tells the protocol (``[`` TJSON, ``0x80`` strict binary, ``0x82``
compact); ``Content-Type`` is only a hint, since clients disagree on it (Python's THttpClient
sends ``application/x-thrift`` with JSON bodies). Upstream HMS always speaks strict binary.
"""

from __future__ import annotations

from typing import Protocol

from .binary import (
    CALL,
    EXCEPTION,
    FIELD_HEADER,
    I32,
    ONEWAY,
    BinaryMessageScanner,
    read_message_header,
    read_reply_header,
    write_message_header,
)
from .call_types import check_call_types
from .compact import (
    PROTOCOL_ID,
    binary_message_to_compact,
    compact_application_exception,
    compact_message_to_binary,
)
from .errors import ProtocolError
from .schema import ServiceSchema, TType
from .translate import (
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
        """Header and strict-binary CALL/ONEWAY message, its type the one the IDL declares
        (:func:`check_call_type`) and its arguments typed as the IDL declares them
        (:func:`~gateway.thrift.call_types.check_call_types`). Raises ``ProtocolError`` (→ 400)."""
        ...

    def encode_reply(self, message: bytes, schema: ServiceSchema, seqid: int) -> bytes:
        """The client's form of a strict-binary REPLY/EXCEPTION. Raises ``ProtocolError``."""
        ...

    def application_exception(self, name: str, seqid: int, message: str, type_code: int) -> bytes:
        """An EXCEPTION message carrying ``TApplicationException`` in the client's protocol."""
        ...


class CallDecoder:
    """What every codec does with a call once it is strict binary, written once: the checks
    against the IDL that all client protocols pass before any call-side step sees the call."""

    def to_binary(self, body: bytes, schema: ServiceSchema) -> tuple[MessageHeader, bytes]:
        """Header and the whole strict-binary message of ``body``. Raises ``ProtocolError``."""
        raise NotImplementedError

    def decode_call(self, body: bytes, schema: ServiceSchema) -> tuple[MessageHeader, bytes]:
        """:meth:`Codec.decode_call`: :meth:`to_binary`, then the message type and the
        arguments' types checked against the IDL. Raises ``ProtocolError``."""
        header, message = self.to_binary(body, schema)
        check_call_type(header, schema)
        check_call_types(message, header.name, schema)
        return header, message


class TJSONCodec(CallDecoder):
    """Apache Thrift TJSONProtocol, the protocol of MS-HMSHTTP."""

    name = "tjson"
    content_type = "application/vnd.apache.thrift.json"

    def to_binary(self, body: bytes, schema: ServiceSchema) -> tuple[MessageHeader, bytes]:
        return tjson_call_to_binary(body, schema)

    def encode_reply(self, message: bytes, schema: ServiceSchema, seqid: int) -> bytes:
        return binary_reply_to_tjson(message, schema, seqid=seqid)

    def application_exception(self, name: str, seqid: int, message: str, type_code: int) -> bytes:
        return tapplication_exception_tjson(name, seqid, message, type_code)


def check_call_type(header: MessageHeader, schema: ServiceSchema) -> None:
    """Raise ``ProtocolError`` unless the message type is the one the IDL declares for the
    method: ONEWAY(4) for a ``oneway`` method, CALL(1) for every other (and for methods the IDL
    does not know). A server answers a two-way method even when the call says ONEWAY, so a
    mistyped call would leave a reply nobody reads (Thrift's ``TProcessor`` does not check)."""
    method = schema.methods.get(header.name)
    expected = ONEWAY if method is not None and method.oneway else CALL
    if header.type != expected:
        kind = "oneway" if expected == ONEWAY else "two-way"
        raise ProtocolError(
            f"message type {header.type} for {header.name[:100]}, which the IDL declares {kind}: "
            f"expected {'ONEWAY(4)' if expected == ONEWAY else 'CALL(1)'}"
        )


class BinaryCodec(CallDecoder):
    """Strict TBinaryProtocol over HTTP, as Hive 4's HTTP-mode client and Trino send it.

    The body must be exactly one complete, well-formed strict message (version word
    ``0x8001``; old-style non-strict messages are refused); it goes upstream unchanged,
    and the upstream's reply comes back unchanged except for the client's seqid.
    """

    name = "binary"
    content_type = "application/x-thrift"

    def to_binary(self, body: bytes, schema: ServiceSchema) -> tuple[MessageHeader, bytes]:
        data = bytes(body)
        header, _ = read_message_header(data)
        end = BinaryMessageScanner(len(data)).feed(data)
        if end is None:
            raise ProtocolError("binary message truncated")
        if end != len(data):
            raise ProtocolError(f"{len(data) - end} bytes after the end of the binary message")
        return header, data

    def encode_reply(self, message: bytes, schema: ServiceSchema, seqid: int) -> bytes:
        header, pos = read_reply_header(message)
        if header.seqid == seqid:
            return bytes(message)
        return bytes(message[: pos - 4]) + I32.pack(seqid) + bytes(message[pos:])

    def application_exception(self, name: str, seqid: int, message: str, type_code: int) -> bytes:
        out = bytearray()
        write_message_header(out, name, EXCEPTION, seqid)
        text = message.encode("utf-8", "replace")
        out += FIELD_HEADER.pack(TType.STRING, 1) + I32.pack(len(text)) + text
        out += FIELD_HEADER.pack(TType.I32, 2) + I32.pack(type_code)
        out.append(TType.STOP)
        return bytes(out)


class CompactCodec(CallDecoder):
    """Apache Thrift TCompactProtocol over HTTP (first byte ``0x82``); see :mod:`.compact`."""

    name = "compact"
    content_type = "application/vnd.apache.thrift.compact"

    def to_binary(self, body: bytes, schema: ServiceSchema) -> tuple[MessageHeader, bytes]:
        return compact_message_to_binary(body)

    def encode_reply(self, message: bytes, schema: ServiceSchema, seqid: int) -> bytes:
        read_reply_header(message)
        return binary_message_to_compact(message, seqid)

    def application_exception(self, name: str, seqid: int, message: str, type_code: int) -> bytes:
        return compact_application_exception(name, seqid, message, type_code)


TJSON = TJSONCodec()
BINARY = BinaryCodec()
COMPACT = CompactCodec()
_BY_FIRST_BYTE: dict[int, Codec] = {ord("["): TJSON, 0x80: BINARY, PROTOCOL_ID: COMPACT}


def detect_codec(body: bytes, content_type: str | None = None) -> Codec:
    """The codec for ``body``, chosen by its first byte: ``[`` (after blanks) TJSON, ``0x80``
    strict binary, ``0x82`` compact. ``content_type`` only words the error.

    Raises ``ProtocolError`` when no supported protocol starts that way.
    """
    codec = _BY_FIRST_BYTE.get(body[0]) if body else None
    if codec is None:
        start = body.lstrip(b" \t\r\n")[:1]
        codec = TJSON if start == b"[" else None
    if codec is None:
        hint = f" (Content-Type {content_type[:60]})" if content_type else ""
        raise ProtocolError(
            "body is neither TJSON (starts with '['), strict binary (0x80) nor compact (0x82)"
            + hint
        )
    return codec
