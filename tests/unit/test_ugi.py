"""One identity per upstream connection: set_ugi on connect, pooling per identity, LRU bounds.

The fake HMS (unit tests may use fakes) answers ``set_ugi`` like HMS 2.3 and answers
``get_all_databases`` with the user its connection was told, so a reply shows which identity's
connection served it.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import BinaryMessageScanner, read_message_header
from gateway.thrift.schema import TType
from gateway.thrift.translate import encode_binary_call
from gateway.upstream.ugi import (
    UpstreamIdentityRefused,
    check_set_ugi_reply,
    set_ugi_call,
    ugi_key,
)
from gateway.upstream.pool import UpstreamPool
from tests.support.fake_hms import ScriptedServer

CALL = encode_binary_call("get_all_databases", 1, [])


def reply(name: str, body: bytes, mtype: int = 2, seqid: int = 0) -> bytes:
    return (struct.pack("!Ii", 0x80010000 | mtype, len(name)) + name.encode()
            + struct.pack("!i", seqid) + body)


def strings_result(items: list[str]) -> bytes:
    out = b"\x0f" + struct.pack("!h", 0) + b"\x0b" + struct.pack("!i", len(items))
    for item in items:
        out += struct.pack("!i", len(item)) + item.encode()
    return out + b"\x00"


def meta_exception_result(message: str) -> bytes:
    return (b"\x0c" + struct.pack("!h", 1) + b"\x0b" + struct.pack("!h", 1)
            + struct.pack("!i", len(message)) + message.encode() + b"\x00\x00")


def read_strings(message: bytes) -> list[str]:
    _, pos = read_message_header(message)
    (count,) = struct.unpack_from("!i", message, pos + 4)
    pos += 8
    out = []
    for _ in range(count):
        (n,) = struct.unpack_from("!i", message, pos)
        out.append(message[pos + 4 : pos + 4 + n].decode())
        pos += 4 + n
    return out


class UgiHMS(ScriptedServer):
    def __init__(self):
        self.connections: list[list[str]] = []  # per connection: method names received

    async def _serve(self, reader, writer):
        calls: list[str] = []
        self.connections.append(calls)
        user = "(none)"
        try:
            while True:
                scanner, data = BinaryMessageScanner(1 << 20), b""
                while (end := scanner.feed(chunk := await reader.read(65536))) is None:
                    if not chunk:
                        return
                    data += chunk
                data += chunk
                header, pos = read_message_header(data[:end])
                calls.append(header.name)
                if header.name == "set_ugi":
                    (n,) = struct.unpack_from("!i", data, pos + 3)
                    user = data[pos + 7 : pos + 7 + n].decode()
                    if user == "refused":
                        writer.write(reply("set_ugi", meta_exception_result("no such user"), seqid=header.seqid))
                    else:
                        writer.write(reply("set_ugi", strings_result(["g"]), seqid=header.seqid))
                else:
                    writer.write(reply(header.name, strings_result([user]), seqid=header.seqid))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass


def ident(user: str, *groups: str) -> Identity:
    return Identity(user, Principal(user, "htpasswd"), frozenset(groups))


async def test_set_ugi_once_per_connection_and_connections_per_identity():
    async with UgiHMS() as hms:
        pool = UpstreamPool(hms.url)
        for user in ("alice", "bob", "alice", "bob", "alice"):
            assert read_strings(await pool.call(CALL, identity=ident(user))) == [user]
        assert await pool.call(CALL) and len(hms.connections) == 3  # alice, bob, no identity
        assert sorted(c[:1] for c in hms.connections) == [["get_all_databases"], ["set_ugi"], ["set_ugi"]]
        assert all(c.count("set_ugi") <= 1 for c in hms.connections)
        # the same user with other groups is another identity: another connection
        await pool.call(CALL, identity=ident("alice", "admins"))
        assert len(hms.connections) == 4
        await pool.close()


async def test_idle_identities_bounded_least_recently_used_first():
    async with UgiHMS() as hms:
        pool = UpstreamPool(hms.url, pool_size=8, max_identities=2)
        for user in ("u1", "u2", "u3"):
            await pool.call(CALL, identity=ident(user))
        assert sorted(c.ugi[0] for c in pool._idle) == ["u2", "u3"]  # u1 was least recently used
        await pool.call(CALL, identity=ident("u2"))  # reused: no new connection
        assert len(hms.connections) == 3
        await pool.call(CALL, identity=ident("u1"))  # u1 comes back on a new connection; u3 goes
        assert len(hms.connections) == 4
        assert sorted(c.ugi[0] for c in pool._idle) == ["u1", "u2"]
        await pool.close()


async def test_pool_size_bounds_idle_connections_over_all_identities():
    async with UgiHMS() as hms:
        pool = UpstreamPool(hms.url, pool_size=2, max_identities=10)
        for user in ("a", "b", "c", "d"):
            await pool.call(CALL, identity=ident(user))
        assert [c.ugi[0] for c in pool._idle] == ["c", "d"]
        await pool.close()


async def test_set_ugi_refused_is_an_upstream_error_and_the_call_is_not_sent():
    async with UgiHMS() as hms:
        pool = UpstreamPool(hms.url)
        with pytest.raises(UpstreamIdentityRefused, match="refused set_ugi: no such user") as err:
            await pool.call(CALL, identity=ident("refused"))
        assert err.value.status == 502
        assert hms.connections == [["set_ugi"]] and pool._idle == []
        await pool.close()


def test_set_ugi_call_and_reply_checks():
    key = ugi_key(ident("alice", "b", "a"))
    assert key == ("alice", ("a", "b"))
    message = set_ugi_call(key)
    header, _ = read_message_header(message)
    assert (header.name, header.type) == ("set_ugi", 1)
    assert message == encode_binary_call("set_ugi", 0, [(1, TType.STRING, "alice"), (2, TType.LIST, ["a", "b"])])
    check_set_ugi_reply(reply("set_ugi", strings_result(["a"])), "hms:1")
    with pytest.raises(UpstreamIdentityRefused, match="did not answer set_ugi"):
        check_set_ugi_reply(reply("get_all_databases", strings_result([])), "hms:1")
    exc = reply("set_ugi", b"\x0b" + struct.pack("!h", 1) + struct.pack("!i", 4) + b"boom"
                + b"\x08" + struct.pack("!hi", 2, 1) + b"\x00", mtype=3)
    with pytest.raises(UpstreamIdentityRefused, match="refused set_ugi: boom"):
        check_set_ugi_reply(exc, "hms:1")
    with pytest.raises(UpstreamIdentityRefused, match="malformed"):
        check_set_ugi_reply(reply("set_ugi", b"\x0c\x00"), "hms:1")
    assert ugi_key(None) is None
