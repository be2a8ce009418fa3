"""Calls and replies as thriftpy2 objects, for the steps that must read arguments or write a
reply of their own (catalog policy). Decoding costs tens of microseconds, so only steps that
need it use it; everything else stays on the byte-level translators."""

from __future__ import annotations

from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import MethodSchema


def decode_struct(message: bytes, cls: type):
    """The struct of a strict-binary message (after its header) as an instance of ``cls``.

    Raises ``ProtocolError`` when the bytes do not decode.
    """
    proto = TBinaryProtocol(TMemoryBuffer(message), strict_read=True)
    try:
        proto.read_message_begin()
        value = cls()
        value.read(proto)
    except Exception as exc:  # thriftpy2 raises its own and struct errors
        raise ProtocolError(f"message does not decode: {type(exc).__name__}") from None
    return value


def decode_args(call: bytes, method: MethodSchema):
    """The arguments of a strict-binary CALL of ``method`` (thriftpy2 ``<method>_args``)."""
    return decode_struct(call, method.args_class)  # type: ignore[arg-type]


def encode_reply(name: str, seqid: int, result) -> bytes:
    """A strict-binary REPLY carrying ``result`` (thriftpy2 ``<method>_result``)."""
    buffer = TMemoryBuffer()
    proto = TBinaryProtocol(buffer, strict_write=True)
    proto.write_message_begin(name, TMessageType.REPLY, seqid)
    result.write(proto)
    proto.write_message_end()
    return buffer.getvalue()
