"""SASL DIGEST-MD5 with a delegation token (gateway.upstream.digest over gateway.upstream.cyrus)
against a real DIGEST-MD5 server in this process: Cyrus SASL's own server side, its secrets in a
throw-away sasldb, behind Thrift's SASL framing on a loopback socket. HMS's Java server is in
tests/integration/test_secure_upstream.py."""

from __future__ import annotations

import asyncio
import base64
import ctypes
import re
import struct
import tempfile
from pathlib import Path

import pytest

from gateway.upstream import cyrus
from gateway.upstream.digest import DigestMechanism, offered_ciphers, offered_qops
from gateway.upstream.errors import UpstreamBadReply
from gateway.upstream.sasl import (BAD, COMPLETE, OK, SaslTransport, StaleCredentials,
                                   UpstreamAuthFailed, encode_message, negotiate)
from gateway.upstream.tokens import parse_token
from tests.unit.test_upstream_sasl import make_token

_out = ctypes.POINTER(ctypes.c_void_p)
_len = ctypes.POINTER(ctypes.c_uint)
_GetOpt = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                           ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_uint))
#: The Cyrus server's options; its getopt callback is registered once per process.
_OPTIONS = {b"sasldb_path": str(Path(tempfile.mkdtemp(prefix="hmsgw-sasldb-")) / "sasldb2").encode(),
            b"auxprop_plugin": b"sasldb", b"mech_list": b"DIGEST-MD5"}
_kept: dict[bytes, ctypes.c_char_p] = {}


@_GetOpt
def _getopt(_context, _plugin, option, result, length):
    value = _OPTIONS.get(option)
    if value is None:
        return -1
    _kept[option] = ctypes.c_char_p(value)
    result[0] = _kept[option]
    if length:
        length[0] = len(value)
    return 0


_server_callbacks = (cyrus._Callback * 2)(cyrus._Callback(1, ctypes.cast(_getopt, ctypes.c_void_p), None),
                                          cyrus._Callback(0, None, None))


def _server_library() -> ctypes.CDLL:
    lib = cyrus.library()
    if not getattr(lib, "_test_server", False):
        lib.sasl_server_init.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.sasl_server_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint, _out]
        lib.sasl_setpass.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint,
                                     ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint]
        lib.sasl_server_start.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint, _out, _len]
        lib.sasl_server_step.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint, _out, _len]
        assert lib.sasl_server_init(_server_callbacks, b"hmsgw-test") == 0
        lib._test_server = True
    return lib


class CyrusServer:
    """A DIGEST-MD5 server as HMS's token side is set up: service ``null``, host and realm
    ``default``, the token's base64 identifier and password as user and secret; it offers
    ``qops`` (strength limits) with a receive buffer of ``maxbuf`` bytes."""

    def __init__(self, token, offer=(0, 256), maxbuf: int = 65536, password: bytes | None = None):
        self.lib = lib = _server_library()
        self.conn = ctypes.c_void_p()
        assert lib.sasl_server_new(b"null", b"default", b"default", None, None, _server_callbacks, 0,
                                   ctypes.byref(self.conn)) == 0
        user = base64.b64encode(token.identifier)
        secret = password if password is not None else base64.b64encode(token.password)
        assert lib.sasl_setpass(self.conn, user, secret, len(secret), None, 0, 1) == 0
        props = cyrus._SecurityProperties(offer[0], offer[1], maxbuf, 0, None, None)
        assert lib.sasl_setprop(self.conn, 101, ctypes.byref(props)) == 0

    def __del__(self):
        self.lib.sasl_dispose(ctypes.byref(self.conn))

    def _call(self, code: int, out, size) -> tuple[int, bytes]:
        return code, ctypes.string_at(out, size.value) if out.value else b""

    def start(self) -> bytes:
        out, size = ctypes.c_void_p(), ctypes.c_uint()
        code, data = self._call(self.lib.sasl_server_start(self.conn, b"DIGEST-MD5", None, 0,
                                                           ctypes.byref(out), ctypes.byref(size)), out, size)
        assert code == 1, code
        return data

    def step(self, response: bytes) -> tuple[int, bytes]:
        out, size = ctypes.c_void_p(), ctypes.c_uint()
        return self._call(self.lib.sasl_server_step(self.conn, response, len(response),
                                                    ctypes.byref(out), ctypes.byref(size)), out, size)

    def encode(self, data: bytes) -> bytes:
        out, size = ctypes.c_void_p(), ctypes.c_uint()
        assert self.lib.sasl_encode(self.conn, data, len(data), ctypes.byref(out), ctypes.byref(size)) == 0
        return ctypes.string_at(out, size.value)

    def decode(self, data: bytes) -> bytes:
        out, size = ctypes.c_void_p(), ctypes.c_uint()
        code = self.lib.sasl_decode(self.conn, data, len(data), ctypes.byref(out), ctypes.byref(size))
        assert code == 0, self.lib.sasl_errdetail(self.conn)
        return ctypes.string_at(out, size.value) if out.value else b""


async def _read_msg(reader):
    status, size = struct.unpack("!BI", await reader.readexactly(5))
    return status, await reader.readexactly(size)


async def _session(server: CyrusServer, mech: DigestMechanism, exchange, seen: list):
    """Thrift's SASL server side (as TSaslServerTransport) in front of ``server``, then
    ``exchange(reader, writer)`` on the negotiated connection; returns the client's transport."""

    async def hms(reader, writer):
        seen.append(await _read_msg(reader))  # START DIGEST-MD5
        seen.append(await _read_msg(reader))  # OK, empty: server-first
        writer.write(encode_message(OK, server.start()))
        status, response = await _read_msg(reader)
        seen.append((status, response))
        code, rspauth = server.step(response)
        if code < 0:
            writer.write(encode_message(BAD, server.lib.sasl_errdetail(server.conn)))
        else:
            writer.write(encode_message(COMPLETE, rspauth))
            await exchange(reader, writer)
        await writer.drain()

    listener = await asyncio.start_server(hms, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await negotiate(reader, writer, mech, "hms:9083")
        io = SaslTransport(reader, writer, "hms:9083", mech, 1 << 26)
        return io, listener, writer
    except BaseException:
        writer.close()
        listener.close()
        raise


@pytest.mark.parametrize("protection,qop", [("authentication", "auth"), ("integrity", "auth-int"),
                                            ("privacy", "auth-conf")])
def test_each_protection_negotiates_its_qop_and_protects_every_frame(protection, qop):
    token = parse_token(make_token())
    server = CyrusServer(token)
    mech = DigestMechanism(token, protection, "hms:9083")
    request = bytes(range(256)) * 800  # 200 KiB: more than HMS's 64 KiB receive buffer
    reply = b"\x80\x01\x00\x02" + b"reply-bytes" * 30000  # larger than one READ_CHUNK
    seen, got = [], {}

    async def exchange(reader, writer):
        frames, plain = [], b""
        while len(plain) < len(request):  # the request's frames, until the server has it whole
            (size,) = struct.unpack("!I", await reader.readexactly(4))
            frames.append(await reader.readexactly(size))
            plain += server.decode(struct.pack("!I", size) + frames[-1]) if qop != "auth" else frames[-1]
        got["frames"], got["request"] = frames, plain
        if qop == "auth":
            writer.write(struct.pack("!I", len(reply)) + reply)
        else:
            writer.write(server.encode(reply))  # Cyrus frames: 4-byte length + protected bytes

    async def go():
        io, listener, writer = await _session(server, mech, exchange, seen)
        try:
            io.write(request)
            await writer.drain()
            data = b""
            while len(data) < len(reply):
                data += await io.chunk()
            return data
        finally:
            writer.close()
            listener.close()

    assert asyncio.run(go()) == reply
    assert seen[0] == (1, b"DIGEST-MD5") and seen[1] == (OK, b"")
    response = seen[2][1].decode()
    assert 'digest-uri="null/default"' in response
    assert f'username="{base64.b64encode(token.identifier).decode()}"' in response
    assert base64.b64encode(token.password).decode() not in response
    assert f"qop={qop}" in response
    assert "nc=00000001" in response  # a full authentication, never a cached "fast reauth"
    assert mech.complete and mech.qop == qop
    assert got["request"] == request
    if qop == "auth":
        assert got["frames"] == [request]
    else:  # every frame protected, none over the server's buffer, none carrying the plain bytes
        assert len(got["frames"]) > 1 and all(len(f) <= 65536 for f in got["frames"])
        assert (request[:64] in got["frames"][0]) == (qop == "auth-int")  # privacy: ciphertext
    if qop == "auth-conf":
        assert "cipher=rc4" in response  # the strongest both have


@pytest.mark.parametrize("size,pooled", [(300_000, True), (1_500_000, False)])
def test_a_connection_is_not_pooled_again_after_a_large_protected_reply(size, pooled):
    """Cyrus keeps buffers of about three times the largest frame a connection unwrapped for
    the connection's life: past RETAINED_FRAME_BYTES the pool closes it instead of keeping it."""
    token = parse_token(make_token())
    server = CyrusServer(token)
    mech = DigestMechanism(token, "privacy", "hms:9083")
    reply = b"\x80" * size

    async def exchange(reader, writer):
        writer.write(server.encode(reply))

    async def go():
        io, listener, writer = await _session(server, mech, exchange, [])
        try:
            data = b""
            while len(data) < size:
                data += await io.chunk()
            return data, io.reusable(), io.unread()
        finally:
            writer.close()
            listener.close()

    data, reusable, unread = asyncio.run(go())
    assert data == reply and not unread
    assert reusable is pooled


@pytest.mark.parametrize("protection", ["authentication", "integrity"])
def test_every_connection_authenticates_in_full_even_after_an_earlier_one(protection):
    """Cyrus's DIGEST-MD5 keeps a process-wide cache for client-first "fast reauthentication";
    Thrift's SASL is server-first, so each connection answers its own server's challenge."""
    token = parse_token(make_token())
    for _ in range(2):
        server = CyrusServer(token)
        mech = DigestMechanism(token, protection, "hms:9083")
        assert mech.initial_response() == b""
        response = mech.step(server.start())
        assert b"nc=00000001" in response
        code, rspauth = server.step(response)
        assert code == 1 and mech.step(rspauth) == b"" and mech.complete
        assert mech.qop == {"authentication": "auth", "integrity": "auth-int"}[protection]


def test_a_tampered_frame_does_not_verify():
    token = parse_token(make_token())
    server = CyrusServer(token)
    mech = DigestMechanism(token, "integrity", "hms:9083")

    async def exchange(reader, writer):
        packet = bytearray(server.encode(b"\x80\x01\x00\x02reply"))
        packet[6] ^= 0x01  # one bit of the message: its HMAC no longer matches
        writer.write(bytes(packet))

    async def go():
        io, listener, writer = await _session(server, mech, exchange, [])
        try:
            await io.chunk()
        finally:
            writer.close()
            listener.close()

    with pytest.raises(UpstreamBadReply, match="does not verify"):
        asyncio.run(go())


def test_an_hms_not_offering_the_protection_is_named_before_credentials_are_sent():
    token = parse_token(make_token())
    mech = DigestMechanism(token, "privacy", "hms:9083")
    mech.initial_response()
    challenge = b'realm="default",nonce="abc",qop="auth,auth-int",charset=utf-8,algorithm=md5-sess'
    with pytest.raises(UpstreamAuthFailed) as caught:
        mech.step(challenge)
    assert "hadoop.rpc.protection=authentication,integrity" in str(caught.value)
    assert "upstream.sasl.protection is privacy" in str(caught.value)
    assert offered_qops(b'nonce="n",qop=auth-conf,charset=utf-8') == ["auth-conf"]
    assert offered_qops(b'nonce="n",charset=utf-8') == ["auth"]  # RFC 2831's default


def test_a_refused_token_is_stale_credentials_and_never_shown():
    token = parse_token(make_token())
    server = CyrusServer(token, password=b"not-the-password")
    mech = DigestMechanism(token, "authentication", "hms:9083")

    async def nothing(reader, writer):
        pass

    with pytest.raises(StaleCredentials) as caught:
        asyncio.run(_session(server, mech, nothing, []))
    assert "alice" in str(caught.value)
    error = mech.refused(f"token {token.text} expired")
    assert token.text not in str(error)


def test_a_frame_over_digest_md5s_buffer_is_refused_from_its_length_with_the_limit():
    """The gateway announces RFC 2831's largest maxbuf; a longer frame is refused from its
    4-byte length, its body never awaited (the server sends 10 bytes of it and closes)."""
    token = parse_token(make_token())
    server = CyrusServer(token)
    mech = DigestMechanism(token, "integrity", "hms:9083")

    async def exchange(reader, writer):
        writer.write(struct.pack("!I", cyrus.MAX_BUFFER + 1) + b"\0" * 10)
        await writer.drain()
        writer.close()

    async def go():
        io, listener, writer = await _session(server, mech, exchange, [])
        try:
            await io.chunk()
        finally:
            writer.close()
            listener.close()

    with pytest.raises(UpstreamBadReply) as caught:
        asyncio.run(go())
    assert f"SASL frame of {cyrus.MAX_BUFFER + 1} bytes" in str(caught.value)
    assert f"DIGEST-MD5 auth-int layer carries at most {cyrus.MAX_BUFFER} bytes" in str(caught.value)


def _with_ciphers(challenge: bytes, ciphers: str) -> bytes:
    """``challenge`` with its cipher-opts replaced, as an active attacker may (the digest does
    not cover them)."""
    assert re.search(rb'cipher="[^"]*3des[^"]*"', challenge)  # Cyrus offers the strong ones too
    return re.sub(rb'cipher="[^"]*"', b'cipher="' + ciphers.encode() + b'"', challenge)


@pytest.mark.parametrize("ciphers", ["rc4-40", "rc4-56", "des", "rc4-40,rc4-56,des"])
def test_privacy_refuses_ciphers_under_112_bits_naming_both_sides(ciphers):
    """Cyrus's server offering everything, its challenge stripped on the way to weak ciphers:
    Cyrus's client, told min_ssf 112, finds no acceptable layer, and nothing is answered."""
    token = parse_token(make_token())
    server = CyrusServer(token)
    mech = DigestMechanism(token, "privacy", "hms:9083")
    mech.initial_response()
    with pytest.raises(UpstreamAuthFailed) as caught:
        mech.step(_with_ciphers(server.start(), ciphers))
    message = str(caught.value)
    assert f"offers DIGEST-MD5 (delegation tokens) the ciphers {ciphers} " in message
    assert "upstream.sasl.protection privacy requires one of at least 112 bits (3des or rc4)" in message
    assert not mech.complete


def test_a_server_offering_only_weak_ciphers_is_refused():
    """Cyrus's own server capped at 56 bits offers rc4-40, rc4-56 and des only."""
    token = parse_token(make_token())
    server = CyrusServer(token, offer=(0, 56))
    challenge = server.start()
    assert offered_ciphers(challenge) and "3des" not in offered_ciphers(challenge)
    mech = DigestMechanism(token, "privacy", "hms:9083")
    mech.initial_response()
    with pytest.raises(UpstreamAuthFailed, match=f"the ciphers {','.join(offered_ciphers(challenge))} "):
        mech.step(challenge)


@pytest.mark.parametrize("ciphers,chosen,ssf", [("rc4", "rc4", 128), ("rc4-40,rc4-56,des,rc4", "rc4", 128)])
def test_privacy_takes_a_strong_cipher_offered_beside_weak_ones(ciphers, chosen, ssf):
    # (3des, at 112 bits, passes the floor too, but Debian's Cyrus 2.1.28 cannot start it.)
    token = parse_token(make_token())
    server = CyrusServer(token)
    mech = DigestMechanism(token, "privacy", "hms:9083")
    mech.initial_response()
    response = mech.step(_with_ciphers(server.start(), ciphers))
    assert re.search(rf"cipher={chosen}(,|$)", response.decode())
    code, rspauth = server.step(response)
    assert code == 1 and mech.step(rspauth) == b"" and mech.complete
    assert (mech.qop, mech.ssf) == ("auth-conf", ssf)
    assert server.decode(b"".join(struct.pack("!I", len(p)) + p for p in mech.wrap(b"call"))) == b"call"


def test_cyrus_without_the_mechanism_is_a_clear_start_up_error():
    cyrus.require("DIGEST-MD5")
    with pytest.raises(cyrus.CyrusUnavailable, match="libsasl2-modules"):
        cyrus.require("NO-SUCH-MECHANISM")
