"""Thrift transports on one upstream TCP connection: unframed (a bare stream of messages) or
framed (each message after a 4-byte big-endian length), as Apache Thrift's ``TSocket`` and
``TFramedTransport`` wrap it. HMS speaks unframed unless
``hive.metastore.thrift.framed.transport.enabled`` is set.

Both read one reply at a time, either whole (:meth:`message`) or as raw chunks for a streaming
consumer (:meth:`begin`, then :meth:`chunk` until the consumer has the whole message), and both
tell whether bytes are waiting unread (:meth:`unread`), so that a connection goes back to the
pool only when nothing from an earlier call is left.

No async generator on this path: one left unfinished (the reader stops at the reply's end) is
closed by the event loop's finaliser hook, which costs each call a ``call_soon_threadsafe``
wake-up and a task (docs/performance.md, issue 14).
"""

from __future__ import annotations

import asyncio
import struct

from gateway.thrift.reply_translator import message_scanner
from gateway.thrift.errors import ProtocolError
from gateway.upstream.errors import UpstreamBadReply

READ_CHUNK = 256 * 1024
_FRAME = struct.Struct("!i")


class Unframed:
    """Messages back to back on the stream; a reply's end is found by scanning it."""

    framed = False

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, label: str):
        self.reader, self.writer, self.label = reader, writer, label

    def write(self, message: bytes) -> None:
        self.writer.write(message)

    def unread(self) -> bool:
        """Whether bytes arrived that no call has read (a stray or late reply)."""
        # StreamReader has no public count of buffered bytes.
        return bool(self.reader._buffer)  # type: ignore[attr-defined]

    def reusable(self) -> bool:
        """Whether the connection may go back to the pool after a call (a transport that
        holds memory sized to what it carried says no)."""
        return True

    async def begin(self, max_bytes: int) -> None:
        """Start reading one reply (a frame's length, for :class:`Framed`)."""

    async def chunk(self) -> bytes:
        """The reply's next bytes as they arrive (after :meth:`begin`); ``b""`` when the
        transport says the reply has ended (the end of a frame). Raises ``IncompleteReadError``
        if the connection closes first."""
        chunk = await self.reader.read(READ_CHUNK)
        if not chunk:
            raise asyncio.IncompleteReadError(b"", None)
        return chunk

    async def message(self, max_bytes: int) -> bytes:
        """One whole strict-binary message. Raises :class:`UpstreamBadReply` for a malformed or
        oversized one, or bytes after it."""
        scanner = message_scanner(max_bytes)
        chunks: list[bytes] = []
        while True:
            chunk = await self.chunk()
            chunks.append(chunk)
            try:
                end = scanner.feed(chunk)
            except ProtocolError as exc:
                raise UpstreamBadReply(f"upstream {self.label} sent {exc.reason}") from None
            if end is not None:
                data = b"".join(chunks)
                if end != len(data):
                    raise UpstreamBadReply(f"upstream {self.label} sent bytes after the reply")
                return data


class Framed(Unframed):
    """Each message after its i32 length (``TFramedTransport``)."""

    framed = True

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, label: str):
        super().__init__(reader, writer, label)
        self._left = 0

    def write(self, message: bytes) -> None:
        self.writer.write(_FRAME.pack(len(message)))
        self.writer.write(message)

    async def _frame_size(self, max_bytes: int) -> int:
        (size,) = _FRAME.unpack(await self.reader.readexactly(4))
        if size <= 0 or size > max_bytes:
            raise UpstreamBadReply(f"upstream {self.label} sent a frame of {size} bytes")
        return size

    async def begin(self, max_bytes: int) -> None:
        self._left = await self._frame_size(max_bytes)

    async def chunk(self) -> bytes:
        """The frame's bytes as they arrive, then ``b""``."""
        if not self._left:
            return b""
        chunk = await self.reader.read(min(READ_CHUNK, self._left))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", None)
        self._left -= len(chunk)
        return chunk

    async def message(self, max_bytes: int) -> bytes:
        return await self.reader.readexactly(await self._frame_size(max_bytes))
