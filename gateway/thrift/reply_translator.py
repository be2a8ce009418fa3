"""Resumable translation of one strict-binary REPLY/EXCEPTION into TJSON, fed chunk by chunk.

:func:`reply_translator` returns an object with ``feed(chunk) -> int | None`` (the message
length once the chunks fed so far hold the whole message; bytes after it are ignored) and
``take() -> bytes`` (the TJSON produced since the last call), plus ``pending`` (bytes waiting).
``feed`` raises ``ProtocolError`` on a malformed message or one longer than ``max_bytes``.

The C translator (``_speedups.ReplyTranslator``) emits TJSON as values complete and keeps
only the bytes of the token being read. The pure-Python fallback finds the end with
:class:`~gateway.thrift.binary.BinaryMessageScanner` and translates the whole message then.

:func:`binary_passthrough` has the same interface for a client that speaks strict binary itself:
the reply's own bytes come out as they arrive, with the client's seqid written into the header.

:func:`message_scanner` finds where a REPLY/EXCEPTION ends (for a reply read whole) with the
same C translator, its output thrown away: about 7 ms of CPU for a 2.8 MB ``get_partitions``
reply of 5,000 partitions, against 150 ms for the pure-Python scanner.
"""

from __future__ import annotations

from . import accel
from .binary import BinaryMessageScanner
from .schema import ServiceSchema

__all__ = ["reply_translator", "message_scanner", "binary_passthrough"]


class _PyReplyTranslator:
    __slots__ = ("_schema", "_seqid", "_scanner", "_chunks", "_out")

    def __init__(self, schema: ServiceSchema, max_bytes: int, seqid: int | None):
        self._schema, self._seqid = schema, seqid
        self._scanner = BinaryMessageScanner(max_bytes)
        self._chunks: list[bytes] = []
        self._out = b""

    @property
    def pending(self) -> int:
        return len(self._out)

    def feed(self, chunk: bytes) -> int | None:
        if self._chunks is None:
            return self._scanner.feed(b"")
        self._chunks.append(bytes(chunk))
        end = self._scanner.feed(chunk)
        if end is not None:
            from .translate import binary_reply_to_tjson  # translate imports this package's modules

            message = b"".join(self._chunks)[:end]
            self._chunks = None  # type: ignore[assignment]
            self._out = binary_reply_to_tjson(message, self._schema, seqid=self._seqid)
        return end

    def take(self) -> bytes:
        out, self._out = self._out, b""
        return out


def reply_translator(schema: ServiceSchema, max_bytes: int, seqid: int | None = None):
    """A translator for one reply (see the module docstring); ``seqid`` replaces the reply's."""
    fast = accel.reply_translator(schema, max_bytes, seqid)
    return fast if fast is not None else _PyReplyTranslator(schema, max_bytes, seqid)


class _CMessageScanner:
    """:class:`~gateway.thrift.binary.BinaryMessageScanner`'s ``feed`` over the C translator.

    No schema: every string is read as a string (the IDL's binary fields only change how the
    TJSON would spell them, not where the message ends)."""

    __slots__ = ("_translator",)

    def __init__(self, c_module, max_bytes: int):
        self._translator = c_module.ReplyTranslator({}, max_bytes, None)

    def feed(self, chunk: bytes) -> int | None:
        end = self._translator.feed(chunk)
        self._translator.take()  # the TJSON is not wanted: keep memory flat
        return end


def message_scanner(max_bytes: int):
    """An object with ``feed(chunk) -> int | None`` for one strict-binary REPLY or EXCEPTION:
    the message length once the chunks fed so far hold it all (as
    :class:`~gateway.thrift.binary.BinaryMessageScanner`). Raises ``ProtocolError`` on a
    malformed message, a CALL/ONEWAY, or one longer than ``max_bytes`` (the C code's reasons,
    which may be worded differently from the Python scanner's)."""
    c_module = accel._c  # None under HMS_GATEWAY_PURE_PYTHON=1 or without the build
    return _CMessageScanner(c_module, max_bytes) if c_module is not None else BinaryMessageScanner(max_bytes)


class _BinaryPassThrough:
    """The reply's bytes unchanged but for the seqid (see :func:`binary_passthrough`). Output is
    held until the header, and so the seqid, is complete; bytes after the message are dropped."""

    __slots__ = ("_scanner", "_seqid", "_out", "_fed", "_end", "_patched")

    def __init__(self, max_bytes: int, seqid: int | None):
        self._scanner = message_scanner(max_bytes)
        self._seqid = seqid
        self._out = bytearray()
        self._fed = 0
        self._end: int | None = None
        self._patched = seqid is None

    @property
    def pending(self) -> int:
        return len(self._out) if self._patched else 0

    def feed(self, chunk: bytes) -> int | None:
        if self._end is not None:
            return self._end
        end = self._scanner.feed(chunk)
        part = chunk if end is None else chunk[: end - self._fed]
        self._out += part
        self._fed += len(part)
        self._end = end
        if not self._patched:
            self._patch()
        return end

    def _patch(self) -> None:
        # strict header: version|type (4), name length (4), name, seqid (4)
        if len(self._out) < 8:
            return
        at = 8 + int.from_bytes(self._out[4:8], "big")
        if len(self._out) >= at + 4:
            self._out[at:at + 4] = self._seqid.to_bytes(4, "big", signed=True)  # type: ignore[union-attr]
            self._patched = True

    def take(self) -> bytes:
        if not self._patched:
            return b""
        out = bytes(self._out)
        self._out.clear()
        return out


def binary_passthrough(max_bytes: int, seqid: int | None = None):
    """A translator (``feed``/``take``/``pending``, as :func:`reply_translator`'s) whose output
    is the strict-binary reply itself with ``seqid`` in place of the reply's. Raises
    ``ProtocolError`` from ``feed`` as :func:`message_scanner` does."""
    return _BinaryPassThrough(max_bytes, seqid)
