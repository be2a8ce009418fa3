"""Thrift's SASL transport, client side (Apache Thrift's ``TSaslClientTransport``), on one
upstream connection to a secured HMS (``hive.metastore.sasl.enabled=true``).

Negotiation: each message is a status byte (START 1, OK 2, BAD 3, ERROR 4, COMPLETE 5), a
4-byte big-endian length and a payload. The client sends START with the mechanism's name, then
its initial response (OK, or COMPLETE when the mechanism is already done); then it answers each
challenge until its mechanism is complete, and a server that said OK last still owes a
COMPLETE. BAD and ERROR carry the server's reason.

After negotiation every message travels in frames, a 4-byte length and a payload; with QOP
``auth-int`` or ``auth-conf`` (Hadoop's ``hadoop.rpc.protection`` ``integrity``, ``privacy``) the
payload is the mechanism's wrap of the bytes (a message may take several frames when the
mechanism keeps to the server's receive buffer, as DIGEST-MD5 does), unwrapped frame by frame on
the way in. A wrapped frame longer than the receive buffer the gateway announced in the
negotiation (16 MiB, the largest RFC 2831 and RFC 4752 can announce) is refused from its length
prefix, before its body is read: the prefix is not covered by the layer's MAC.
:class:`SaslTransport` reads replies as :class:`~gateway.upstream.framing.Unframed` does, by
scanning the message for its end, so a reply may span frames. Memory: at ``auth`` a frame is
streamed in chunks (bounded by ``READ_CHUNK``); a wrapped frame must be whole to be unwrapped,
so at ``auth-int``/``auth-conf`` memory is bounded by the largest frame HMS sends (one reply:
HMS flushes one frame per message), itself bounded by ``max_reply_bytes``. A mechanism that keeps
buffers sized to the largest frame it unwrapped (Cyrus SASL's DIGEST-MD5: about three times the
frame) has its connection closed, not pooled, after a frame over ``RETAINED_FRAME_BYTES``.

The mechanisms (GSSAPI, DIGEST-MD5) are in :mod:`gateway.upstream.kerberos` and
:mod:`gateway.upstream.digest`; they follow :class:`Mechanism`.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Protocol

from gateway.upstream.errors import UpstreamBadReply, UpstreamError
from gateway.upstream.framing import READ_CHUNK, Unframed

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
_STATUS_NAMES = {START: "START", OK: "OK", BAD: "BAD", ERROR: "ERROR", COMPLETE: "COMPLETE"}
_HEADER = struct.Struct("!BI")
_LENGTH = struct.Struct("!I")
#: Largest negotiation message accepted (Kerberos tickets with a PAC stay well below it).
MAX_NEGOTIATION_BYTES = 1 << 20
#: A connection whose mechanism retains frame buffers is not pooled again after unwrapping a
#: frame larger than this (idle connections then hold at most a few times this much).
RETAINED_FRAME_BYTES = 1 << 20

#: Hadoop's ``hadoop.rpc.protection`` value → SASL QOP.
QOP_OF_PROTECTION = {"authentication": "auth", "integrity": "auth-int", "privacy": "auth-conf"}
PROTECTION_OF_QOP = {qop: name for name, qop in QOP_OF_PROTECTION.items()}


class UpstreamAuthFailed(UpstreamError):
    """SASL negotiation with HMS failed (502); ``str()`` names both sides' settings, never the
    server's exception text (that is logged)."""

    status = 502
    outcome = "auth_failed"


class StaleCredentials(UpstreamAuthFailed):
    """The server refused credentials the gateway may replace (an expired or cancelled
    delegation token): the caller drops them and tries once more on a new connection."""


class Mechanism(Protocol):
    """One SASL client mechanism on one connection (Cyrus-style)."""

    #: The mechanism's registered name (``GSSAPI``, ``DIGEST-MD5``).
    name: str
    #: Set once the mechanism needs no further challenge.
    complete: bool
    #: The negotiated QOP (``auth``, ``auth-int``, ``auth-conf``), known once complete.
    qop: str
    #: Whether unwrapping keeps buffers sized to the largest frame so far for the
    #: connection's life (Cyrus SASL does): the connection is then closed after a large one.
    retains_frames: bool
    #: The receive buffer the gateway announced to the server (bytes): the longest wrapped
    #: frame it accepts.
    receive_buffer: int

    def initial_response(self) -> bytes:
        """What START is followed by (``b""`` for a server-first mechanism)."""

    def step(self, challenge: bytes) -> bytes:
        """The response to ``challenge``. Raises :class:`UpstreamAuthFailed`."""

    def wrap(self, data: bytes) -> list[bytes]:
        """``data`` protected at :attr:`qop` (``auth-int``/``auth-conf`` only): the payloads of
        the frames that carry it (more than one when the server's receive buffer is smaller)."""

    def unwrap(self, data: bytes) -> bytes:
        """The bytes ``data`` protects. Raises :class:`UpstreamBadReply` when it fails to verify."""

    def refused(self, reason: str) -> UpstreamAuthFailed:
        """The error for a server that answered BAD/ERROR with ``reason`` (logged, not shown)."""


def encode_message(status: int, payload: bytes) -> bytes:
    """One negotiation message: status byte, 4-byte big-endian length, payload."""
    return _HEADER.pack(status, len(payload)) + payload


async def _read_message(reader: asyncio.StreamReader, label: str) -> tuple[int, bytes]:
    status, size = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    if status not in _STATUS_NAMES or status == START:
        raise UpstreamAuthFailed(f"upstream {label} sent SASL status {status}: is it an HMS with "
                                 "hive.metastore.sasl.enabled=true?")
    if size > MAX_NEGOTIATION_BYTES:
        raise UpstreamAuthFailed(f"upstream {label} sent a SASL message of {size} bytes")
    return status, await reader.readexactly(size)


async def negotiate(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    mechanism: Mechanism, label: str) -> None:
    """Run the SASL negotiation of ``mechanism`` on a fresh connection (see the module
    docstring). Raises :class:`UpstreamAuthFailed` (refused, or not SASL), the mechanism's own
    errors, and ``IncompleteReadError``/``OSError`` when the connection breaks."""
    name = mechanism.name.encode("ascii")
    first = mechanism.initial_response()
    writer.write(encode_message(START, name)
                 + encode_message(COMPLETE if mechanism.complete else OK, first))
    await writer.drain()
    status = OK
    while not mechanism.complete:
        status, payload = await _read_message(reader, label)
        if status in (BAD, ERROR):
            raise mechanism.refused(payload.decode("utf-8", "replace"))
        response = mechanism.step(payload)
        if status == COMPLETE:  # the server is done; a client owes it nothing more
            break
        writer.write(encode_message(COMPLETE if mechanism.complete else OK, response))
        await writer.drain()
    if not mechanism.complete:
        raise UpstreamAuthFailed(f"upstream {label} ended SASL {mechanism.name} negotiation early")
    if status == OK:  # our last message completed us; the server must still say COMPLETE
        status, payload = await _read_message(reader, label)
        if status in (BAD, ERROR):
            raise mechanism.refused(payload.decode("utf-8", "replace"))
        if status != COMPLETE:
            raise UpstreamAuthFailed(f"upstream {label} sent SASL {_STATUS_NAMES[status]} "
                                     "after the negotiation completed")


class SaslTransport(Unframed):
    """Thrift messages in SASL frames on a negotiated connection (see the module docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, label: str,
                 mechanism: Mechanism, max_frame_bytes: int):
        super().__init__(reader, writer, label)
        self.mechanism = mechanism
        self.wraps = mechanism.qop != "auth"
        self.max_frame_bytes = max_frame_bytes
        self._left = 0  # bytes of the current plain frame not read yet
        self._pending = b""  # unwrapped bytes not handed out yet
        self._retaining = False  # the mechanism now holds buffers for a large frame

    def write(self, message: bytes) -> None:
        for payload in self.mechanism.wrap(message) if self.wraps else (message,):
            self.writer.write(_LENGTH.pack(len(payload)))
            self.writer.write(payload)

    def unread(self) -> bool:
        return bool(self._left or self._pending or super().unread())

    def reusable(self) -> bool:
        return not self._retaining

    async def chunk(self) -> bytes:
        """The message's next bytes, from the current frame or the next (never ``b""``: a
        reply's end is found by scanning). Raises ``IncompleteReadError`` on EOF and
        :class:`UpstreamBadReply` for an oversized or unverifiable frame."""
        if self._pending:
            chunk, self._pending = self._pending[:READ_CHUNK], self._pending[READ_CHUNK:]
            return chunk
        while not self._left:
            (size,) = _LENGTH.unpack(await self.reader.readexactly(_LENGTH.size))
            if size > self.max_frame_bytes:
                raise UpstreamBadReply(f"upstream {self.label} sent a SASL frame of {size} bytes")
            if self.wraps and size > self.mechanism.receive_buffer:
                raise UpstreamBadReply(
                    f"upstream {self.label} sent a SASL frame of {size} bytes: the {self.mechanism.name} "
                    f"{self.mechanism.qop} layer carries at most {self.mechanism.receive_buffer} bytes "
                    "per frame (page the call, or use protection authentication)")
            if self.wraps:
                data = self.mechanism.unwrap(await self.reader.readexactly(size))
                if size > RETAINED_FRAME_BYTES and self.mechanism.retains_frames:
                    self._retaining = True
                if data:
                    self._pending = data[READ_CHUNK:]
                    return data[:READ_CHUNK]
            else:
                self._left = size
        chunk = await self.reader.read(min(READ_CHUNK, self._left))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", None)
        self._left -= len(chunk)
        return chunk
