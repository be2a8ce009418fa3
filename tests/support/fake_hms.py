"""A scripted TCP server speaking just enough strict-binary Thrift to stand in for HMS in unit tests."""

from __future__ import annotations

import asyncio
import struct


def binary_message(name: str, mtype: int, seqid: int, struct_body: bytes) -> bytes:
    head = struct.pack("!I", 0x80010000 | mtype) + struct.pack("!i", len(name)) + name.encode()
    return head + struct.pack("!i", seqid) + struct_body


def list_of_strings_reply(name: str, seqid: int, items: list[str] | list[bytes]) -> bytes:
    """A REPLY whose success is ``list<string>`` of ``items`` (str as UTF-8, bytes as they are)."""
    head = b"\x0f" + struct.pack("!h", 0) + b"\x0b" + struct.pack("!i", len(items))
    encoded = [item.encode() if isinstance(item, str) else item for item in items]
    body = b"".join(struct.pack("!i", len(item)) + item for item in encoded)
    return binary_message(name, 2, seqid, head + body + b"\x00")


CALL = binary_message("get_all_databases", 1, 1, b"\x00")
REPLY = list_of_strings_reply("get_all_databases", 1, ["default", "x" * 5000])


class ScriptedServer:
    """A loopback TCP server for ``async with``: subclasses answer in ``_serve(reader, writer)``;
    ``url`` is ``thrift://127.0.0.1:<port>``. Connections it records in ``writers`` are closed
    on exit."""

    writers: list[asyncio.StreamWriter]

    async def __aenter__(self):
        self.writers = getattr(self, "writers", [])
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"thrift://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc):
        for w in self.writers:
            w.close()
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class FakeHMS(ScriptedServer):
    """Reads one request per turn (by length of the known CALL) and answers per ``behaviour``."""

    def __init__(self, behaviour: str = "ok", framed: bool = False):
        self.behaviour, self.framed = behaviour, framed
        self.connections = 0
        self.requests = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def _serve(self, reader, writer):
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                if self.framed:
                    (n,) = struct.unpack("!i", await reader.readexactly(4))
                    await reader.readexactly(n)
                else:
                    await reader.readexactly(len(CALL))
                self.requests += 1
                if self.behaviour == "ok":
                    if self.framed:
                        writer.write(struct.pack("!i", len(REPLY)) + REPLY)
                    else:
                        for i in range(0, len(REPLY), 7):  # dribble: many small chunks
                            writer.write(REPLY[i:i + 7])
                            await writer.drain()
                    await writer.drain()
                elif self.behaviour == "silent":
                    await asyncio.sleep(3600)
                elif self.behaviour == "garbage":
                    writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                    await writer.drain()
                elif self.behaviour == "trailing":
                    writer.write(REPLY + b"\x00\x01")
                    await writer.drain()
                elif self.behaviour == "huge-frame":
                    writer.write(struct.pack("!i", 1 << 30))
                    await writer.drain()
                elif self.behaviour == "half-then-close":
                    writer.write(REPLY[: len(REPLY) // 2])
                    await writer.drain()
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
