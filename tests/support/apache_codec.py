"""Apache Thrift's own Python protocols, to write and read reference messages in tests."""

from __future__ import annotations

from thrift.protocol import TBinaryProtocol
from thrift.transport import TTransport


def strict_binary(transport):
    """Apache's TBinaryProtocol with strict read and write, as HMS speaks it."""
    return TBinaryProtocol.TBinaryProtocol(transport, strictRead=True, strictWrite=True)


def write_message(factory, name: str, mtype: int, seqid: int, obj) -> bytes:
    """The bytes of one message written by ``factory(transport)`` (an Apache protocol class)."""
    buffer = TTransport.TMemoryBuffer()
    protocol = factory(buffer)
    protocol.writeMessageBegin(name, mtype, seqid)
    obj.write(protocol)
    protocol.writeMessageEnd()
    return buffer.getvalue()


def read_message(factory, data: bytes, cls):
    """``((name, type, seqid), obj)`` read from ``data`` with ``factory`` into a new ``cls``."""
    protocol = factory(TTransport.TMemoryBuffer(data))
    header = protocol.readMessageBegin()
    obj = cls()
    obj.read(protocol)
    protocol.readMessageEnd()
    return header, obj
