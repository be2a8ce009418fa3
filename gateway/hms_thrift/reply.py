"""A whole upstream reply as a reply-side step sees it.

A step reads :attr:`ThriftReply.result` (the method's result struct decoded by thriftpy2 from the
IDL: ``success`` for field 0, one attribute per declared exception) and may change it and call
:meth:`ThriftReply.replace`, which encodes it back (a list-bucketed table's skew map, which thriftpy2
cannot hold, is carried through as HMS's bytes: :mod:`gateway.thrift.objects`); the
service kind then writes ``message`` in the client's protocol. Decoding happens only when a step asks, and only for methods some step
declared in ``reply_methods``.
"""

from __future__ import annotations

from gateway.thrift.objects import Kept, decode_keeping, decode_struct, encode_reply, encode_restoring
from gateway.thrift.binary import REPLY, read_message_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema


class ThriftReply:
    """``message``: one strict-binary REPLY or EXCEPTION (the client's seqid), ``header`` its header."""

    __slots__ = ("message", "header", "_schema", "_result", "_kept")

    def __init__(self, message: bytes, schema: ServiceSchema):
        self.message = message
        self.header, _ = read_message_header(message)
        self._schema = schema
        self._result = None
        self._kept: Kept | None = None  # a list-bucketed table's skew maps, put back by replace()

    @property
    def is_exception(self) -> bool:
        """True for a ``TApplicationException`` (message type EXCEPTION): no result to see."""
        return self.header.type != REPLY

    @property
    def result(self):
        """The decoded result struct (thriftpy2 object). Raises ``ProtocolError`` when the reply
        is an EXCEPTION message, the method is unknown to the IDL, or the bytes do not decode."""
        if self._result is None:
            method = self._schema.methods.get(self.header.name)
            if self.is_exception or method is None or method.result_class is None:
                raise ProtocolError(f"no result struct to decode for {self.header.name[:100]}")
            try:
                self._result = decode_struct(self.message, method.result_class)
            except ProtocolError:  # a skewed table's map<list<string>,string>: thriftpy2 cannot hold it
                self._result, self._kept = decode_keeping(self.message, method)
        return self._result

    def replace(self, result) -> None:
        """Encode ``result`` (this method's result struct, as :attr:`result` gave it) as the
        reply's new message; skew maps of list-bucketed tables keep HMS's bytes. Raises
        ``ProtocolError`` if they cannot be put back."""
        if self._kept is not None:
            message = encode_restoring(self.header.name, self.header.seqid, result, self._kept)
        else:
            message = encode_reply(self.header.name, self.header.seqid, result)
        self.message, self._result = message, result
