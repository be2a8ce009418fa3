"""One call as the gateway sends it upstream: its own seqid, and the check that a reply answers it.

A proxy that multiplexes clients over pooled connections must never hand one caller a reply
meant for another. Thrift's own clients check each reply's name and seqid
(``TServiceClient.receiveBase`` raises ``TApplicationException`` ``WRONG_METHOD_NAME`` /
``BAD_SEQUENCE_ID``); the gateway does the same on every upstream reply, whatever the upstream
kind (TCP pool or Hive 4 HTTP mode), with seqids of its own so that a stale or foreign reply
cannot match by accident. The caller gets its reply back with its own seqid.
"""

from __future__ import annotations

import itertools

from gateway.thrift.binary import EXCEPTION, I32, REPLY, U32, VERSION_1
from gateway.upstream.errors import UpstreamBadReply

_REPLY_WORDS = (U32.pack(VERSION_1 | REPLY), U32.pack(VERSION_1 | EXCEPTION))
_seqids = itertools.count(1)


class UpstreamCall:
    """A strict-binary CALL or ONEWAY message with the gateway's seqid in place of the client's.

    ``message`` must start with a well-formed strict header (the codecs guarantee it).
    :attr:`message` is what goes upstream; :attr:`seqid` is the client's.
    """

    __slots__ = ("message", "seqid", "_header", "_header_end")

    def __init__(self, message: bytes):
        (name_len,) = I32.unpack_from(message, 4)
        end = 12 + name_len
        (self.seqid,) = I32.unpack_from(message, end - 4)
        own = next(_seqids) & 0x7FFFFFFF
        self.message = b"".join((message[: end - 4], I32.pack(own), message[end:]))
        # Name length, name and seqid: what a reply to this call repeats after its version word.
        self._header = self.message[4:end]
        self._header_end = end

    def check_reply(self, head: bytes | bytearray, label: str) -> bool:
        """Whether ``head`` (the first bytes of a reply) starts as a REPLY or EXCEPTION to this
        call: True when it does, False when more bytes are needed to tell.

        Raises :class:`UpstreamBadReply` (502, outcome ``bad_reply``) as soon as it does not:
        another message type, another method name, or another seqid.
        """
        end = self._header_end
        word = bytes(head[:4])
        if word not in _REPLY_WORDS and not any(w.startswith(word) for w in _REPLY_WORDS):
            raise UpstreamBadReply(f"upstream {label} sent a message that is no reply")
        if len(head) < end:
            return False
        if head[4:end] != self._header:
            raise UpstreamBadReply(f"upstream {label} sent a reply to another call (name or seqid differ)")
        return True

    def client_reply(self, reply: bytes, label: str) -> bytes:
        """The whole ``reply``, checked, with the client's seqid restored.

        Raises :class:`UpstreamBadReply` when it does not answer this call.
        """
        if not self.check_reply(reply, label):
            raise UpstreamBadReply(f"upstream {label} sent a truncated reply")
        end = self._header_end
        return b"".join((reply[: end - 4], I32.pack(self.seqid), reply[end:]))
