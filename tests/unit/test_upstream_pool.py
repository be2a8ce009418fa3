"""The upstream pool against a scripted TCP server (a fake HMS): framing, reuse, failures."""

from __future__ import annotations

import asyncio
import struct

import pytest

from gateway.upstream.errors import (
    UpstreamBadReply,
    UpstreamConnectFailed,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.upstream.pool import Upstream, UpstreamPool


def binary_message(name: str, mtype: int, seqid: int, struct_body: bytes) -> bytes:
    head = struct.pack("!I", 0x80010000 | mtype) + struct.pack("!i", len(name)) + name.encode()
    return head + struct.pack("!i", seqid) + struct_body


def list_of_strings_reply(name: str, seqid: int, items: list[str]) -> bytes:
    # result struct: field 0, type LIST(15) of STRING(11), then STOP
    body = b"\x0f" + struct.pack("!h", 0) + b"\x0b" + struct.pack("!i", len(items))
    for item in items:
        body += struct.pack("!i", len(item)) + item.encode()
    return binary_message(name, 2, seqid, body + b"\x00")


CALL = binary_message("get_all_databases", 1, 1, b"\x00")
REPLY = list_of_strings_reply("get_all_databases", 1, ["default", "x" * 5000])


class FakeHMS:
    """Reads one request per turn (by length of the known CALL) and answers per ``behaviour``."""

    def __init__(self, behaviour: str = "ok", framed: bool = False):
        self.behaviour, self.framed = behaviour, framed
        self.connections = 0
        self.requests = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"thrift://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc):
        for w in self.writers:
            w.close()
        self.server.close()

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


async def test_unframed_reply_in_many_chunks_and_connection_reuse():
    async with FakeHMS() as hms:
        pool = UpstreamPool(hms.url)
        for _ in range(5):
            assert await pool.call(CALL) == REPLY
        assert hms.connections == 1 and hms.requests == 5
        await pool.close()


async def test_framed_transport():
    async with FakeHMS(framed=True) as hms:
        pool = UpstreamPool(hms.url, framed=True)
        assert await pool.call(CALL) == REPLY
        await pool.close()


async def test_concurrent_calls_use_separate_connections():
    async with FakeHMS() as hms:
        pool = UpstreamPool(hms.url, pool_size=2)
        replies = await asyncio.gather(*(pool.call(CALL) for _ in range(6)))
        assert all(r == REPLY for r in replies)
        assert hms.connections >= 2
        assert len(pool._idle) <= 2
        await pool.close()


async def test_connection_refused_is_connect_failed():
    async with FakeHMS() as hms:
        url = hms.url
    pool = UpstreamPool(url)
    with pytest.raises(UpstreamConnectFailed, match="cannot connect"):
        await pool.call(CALL)


async def test_timeout():
    async with FakeHMS("silent") as hms:
        pool = UpstreamPool(hms.url, timeout=0.3)
        with pytest.raises(UpstreamTimeout, match="did not answer within 0.3 s"):
            await pool.call(CALL)
        assert pool._idle == []  # a timed-out connection is never reused
        await pool.close()


@pytest.mark.parametrize("behaviour, error", [
    ("garbage", UpstreamBadReply),
    ("trailing", UpstreamBadReply),
    ("half-then-close", UpstreamUnavailable),
])
async def test_bad_replies(behaviour, error):
    async with FakeHMS(behaviour) as hms:
        pool = UpstreamPool(hms.url, max_reply_bytes=1 << 20)
        with pytest.raises(error):
            await pool.call(CALL)
        assert pool._idle == []
        await pool.close()


async def test_oversized_frame_refused():
    async with FakeHMS("huge-frame", framed=True) as hms:
        pool = UpstreamPool(hms.url, framed=True, max_reply_bytes=1 << 20)
        with pytest.raises(UpstreamBadReply, match="frame of"):
            await pool.call(CALL)
        await pool.close()


async def test_idle_connection_closed_by_server_is_replaced():
    async with FakeHMS() as hms:
        pool = UpstreamPool(hms.url)
        assert await pool.call(CALL) == REPLY
        for w in hms.writers:  # HMS restarts: its side of the idle connection goes away
            w.close()
        await asyncio.sleep(0.05)
        assert await pool.call(CALL) == REPLY
        assert hms.connections == 2
        await pool.close()


async def test_failover_only_when_the_request_was_not_sent():
    async with FakeHMS() as good:
        async with FakeHMS() as closed:
            dead_url = closed.url
        up = Upstream([UpstreamPool(dead_url), UpstreamPool(good.url)])
        assert await up.call(CALL) == REPLY
        async with FakeHMS("silent") as silent:
            up2 = Upstream([UpstreamPool(silent.url, timeout=0.2), UpstreamPool(good.url)])
            with pytest.raises(UpstreamTimeout):  # sent once: never retried elsewhere
                await up2.call(CALL)
            assert good.requests == 1
            await up2.close()
        await up.close()
