"""A whole upstream reply as a reply-side step sees it.

A step reads :attr:`Reply.result` (the method's result struct decoded by thriftpy2 from the
IDL: ``success`` for field 0, one attribute per declared exception) and may change it and call
:meth:`Reply.replace`, which encodes it back; the service kind then writes ``message`` in the
client's protocol. Decoding happens only when a step asks, and only for methods some step
declared in ``reply_methods``.
"""

from __future__ import annotations

from gateway.pipeline.thrift_objects import decode_struct, encode_reply
from gateway.thrift.binary import REPLY, read_message_header
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import ServiceSchema


class Reply:
    """``message``: one strict-binary REPLY or EXCEPTION (the client's seqid), ``header`` its header."""

    __slots__ = ("message", "header", "_schema", "_result")

    def __init__(self, message: bytes, schema: ServiceSchema):
        self.message = message
        self.header, _ = read_message_header(message)
        self._schema = schema
        self._result = None

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
            self._result = decode_struct(self.message, method.result_class)
        return self._result

    def replace(self, result) -> None:
        """Encode ``result`` (this method's result struct) as the reply's new message."""
        self.message, self._result = encode_reply(self.header.name, self.header.seqid, result), result
