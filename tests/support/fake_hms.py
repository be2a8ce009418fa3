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


def answer(call: bytes, reply: bytes = REPLY) -> bytes:
    """``reply`` with the seqid of ``call``, as a Thrift server answers (both share one name)."""
    at = 8 + struct.unpack_from("!i", call, 4)[0]
    return reply[:at] + call[at:at + 4] + reply[at + 4:]


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
    """Reads one request per turn (by length of the known CALL) and answers per ``behaviour``:
    one name for every request, or a list of names for the first requests (then ``ok``)."""

    def __init__(self, behaviour: str | list[str] = "ok", framed: bool = False):
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
                    request = await reader.readexactly(n)
                else:
                    request = await reader.readexactly(len(CALL))
                behaviour = self._behaviour()
                self.requests += 1
                reply = answer(request)
                if behaviour in ("wrong-seqid", "wrong-name", "extra-reply", "late-extra-reply"):
                    at = 8 + len("get_all_databases")  # the reply's seqid
                    if behaviour == "wrong-seqid":
                        reply = reply[:at] + struct.pack("!i", struct.unpack_from("!i", reply, at)[0] ^ 1) + reply[at + 4:]
                    elif behaviour == "wrong-name":
                        reply = reply.replace(b"get_all_databases", b"get_all_functions")
                    framed = struct.pack("!i", len(reply)) + reply if self.framed else reply
                    writer.write(framed * (2 if behaviour == "extra-reply" else 1))
                    await writer.drain()
                    if behaviour == "late-extra-reply":  # a second reply after the first was read
                        await asyncio.sleep(0.2)
                        writer.write(framed)
                        await writer.drain()
                elif behaviour == "ok":
                    if self.framed:
                        writer.write(struct.pack("!i", len(reply)) + reply)
                    else:
                        for i in range(0, len(reply), 7):  # dribble: many small chunks
                            writer.write(reply[i:i + 7])
                            await writer.drain()
                    await writer.drain()
                elif behaviour == "silent":
                    await asyncio.sleep(3600)
                elif behaviour == "garbage":
                    writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                    await writer.drain()
                elif behaviour == "trailing":
                    writer.write(reply + b"\x00\x01")
                    await writer.drain()
                elif behaviour == "huge-frame":
                    writer.write(struct.pack("!i", 1 << 30))
                    await writer.drain()
                elif behaviour == "half-then-close":
                    writer.write(reply[: len(reply) // 2])
                    await writer.drain()
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def _behaviour(self) -> str:
        if isinstance(self.behaviour, str):
            return self.behaviour
        return self.behaviour[self.requests] if self.requests < len(self.behaviour) else "ok"
