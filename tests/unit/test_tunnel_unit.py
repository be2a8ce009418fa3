"""hms_gateway_client.tunnel against a fake HTTPS gateway (aiohttp): message boundaries, framing, oneway,
the gateway's refusals and absence as TApplicationException, the listen-address guard."""

from __future__ import annotations

import asyncio
import ssl
import struct

import pytest
from aiohttp import web

from gateway.certs import write_dev_certificates
from hms_gateway_client.auth import BasicAuth
from gateway.thrift.binary import EXCEPTION, ONEWAY, REPLY, encode_binary_call, read_message_header, write_message_header
from gateway.thrift.schema import TType
from gateway.thrift.translate import INTERNAL_ERROR, UNKNOWN
from gateway.thrift.walk import iter_fields, string_span
from hms_gateway_client.tunnel import Tunnel, TunnelSettings, check_listen_address, spark_setting


def _reply_to(call: bytes) -> bytes:
    """A REPLY of the call's name and seqid whose success string is the call's first argument."""
    header, pos = read_message_header(call)
    arg = b""
    for fid, ftype, start, _ in iter_fields(call, pos):
        if fid == 1 and ftype == TType.STRING:
            first, last = string_span(call, start)
            arg = call[first:last]
    out = bytearray()
    write_message_header(out, header.name, REPLY, header.seqid)
    out += struct.pack(">bhi", TType.STRING, 0, len(arg)) + arg + b"\x00"
    return bytes(out)


class FakeGateway:
    """Answers POSTs by echo, or with ``status`` and a one-line reason when set."""

    def __init__(self):
        self.status = 200
        self.cut = False  # announce 200,000 bytes, send 70,004, then drop the connection
        self.set_cookie: str | None = None
        self.seen: list[tuple[dict, bytes]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append((dict(request.headers), body))
        if self.cut:
            response = web.StreamResponse(headers={"Content-Length": "200000"})
            await response.prepare(request)
            await response.write(b"\x80\x01\x00\x02" + b"x" * 70_000)
            assert request.transport is not None
            request.transport.close()
            return response
        if self.status != 200:
            return web.Response(status=self.status, text="Basic realm refused\n")
        header, _ = read_message_header(body)
        if header.type == ONEWAY:
            return web.Response(status=200)
        response = web.Response(body=_reply_to(body), content_type="application/x-thrift")
        if self.set_cookie:
            response.headers["Set-Cookie"] = self.set_cookie
        return response


@pytest.fixture
def certs(tmp_path):
    return write_dev_certificates(tmp_path / "certs")


async def _start_fake(certs, fake: FakeGateway, port: int = 0) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_post("/gateway/t/svc", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.certificate, certs.private_key)
    site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=ctx)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


class Running:
    """A fake gateway, a tunnel in front of it and one client connection to the tunnel."""

    def __init__(self, certs, **settings):
        self.certs, self.settings, self.fake = certs, settings, FakeGateway()

    async def __aenter__(self) -> "Running":
        self.runner, self.gateway_port = await _start_fake(self.certs, self.fake)
        self.tunnel = Tunnel(_settings(self.gateway_port, self.certs, **self.settings))
        await self.tunnel.start()
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.tunnel.port)
        return self

    async def __aexit__(self, *exc) -> None:
        self.writer.close()
        await self.tunnel.close()
        await self.runner.cleanup()


def _settings(port: int, certs, auth=None, **kw) -> TunnelSettings:
    return TunnelSettings(f"https://localhost:{port}/gateway/t/svc", auth or BasicAuth("etl", "pw"),
                          ca=str(certs.ca_certificate), port=0, **kw)


async def _read_message(reader: asyncio.StreamReader, framed: bool) -> bytes:
    if framed:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(size)
    # Replies in these tests are small: one read holds a whole one.
    return await asyncio.wait_for(reader.read(65536), 30)


def _exception_text(message: bytes) -> tuple[str, int, str, int]:
    header, pos = read_message_header(message)
    assert header.type == EXCEPTION
    text, code = "", -1
    for fid, ftype, start, _ in iter_fields(message, pos):
        if fid == 1:
            first, last = string_span(message, start)
            text = message[first:last].decode()
        elif fid == 2:
            (code,) = struct.unpack_from(">i", message, start)
    return header.name, header.seqid, text, code


def _call(name: str, seqid: int, arg: str) -> bytes:
    return encode_binary_call(name, seqid, [(1, TType.STRING, arg)])


@pytest.mark.parametrize("framed", [False, True])
async def test_calls_forwarded_and_replies_in_order(certs, framed):
    async with Running(certs, framed=framed) as r:
        reader, writer, fake = r.reader, r.writer, r.fake
        calls = [_call("get_database", 7, "sales"), _call("get_table", 8, "x" * 300_000)]
        if framed:
            for c in calls:
                writer.write(struct.pack(">i", len(c)) + c)
            await writer.drain()
            replies = [await _read_message(reader, True) for _ in calls]
        else:
            writer.write(b"".join(calls))  # back to back in one write: the scanner splits them
            await writer.drain()
            expected = sum(len(_reply_to(c)) for c in calls)
            data = b""
            while len(data) < expected:
                data += await asyncio.wait_for(reader.read(65536), 30)
            first = len(_reply_to(calls[0]))
            replies = [data[:first], data[first:]]
        assert replies == [_reply_to(c) for c in calls]
        assert [body for _, body in fake.seen] == calls
        headers = fake.seen[0][0]
        assert headers["Content-Type"] == "application/x-thrift"
        assert headers["Authorization"] == BasicAuth("etl", "pw").headers("x")["Authorization"]


async def test_oneway_gets_no_reply(certs):
    async with Running(certs) as r:
        reader, writer, fake = r.reader, r.writer, r.fake
        oneway = bytearray()
        write_message_header(oneway, "shutdown", ONEWAY, 3)
        oneway.append(0)
        after = _call("get_database", 4, "db")
        writer.write(bytes(oneway) + after)
        await writer.drain()
        reply = await _read_message(reader, False)
        assert reply == _reply_to(after)  # the first bytes back answer the second call
        assert len(fake.seen) == 2


@pytest.mark.parametrize("status, words, code", [
    (401, "refused the credentials (HTTP 401)", UNKNOWN),
    (403, "refused the call (HTTP 403)", UNKNOWN),
    (503, "failed (HTTP 503)", INTERNAL_ERROR),
])
async def test_gateway_refusal_is_tapplicationexception(certs, status, words, code, caplog):
    async with Running(certs) as r:
        reader, writer, fake = r.reader, r.writer, r.fake
        fake.status = status
        writer.write(_call("get_table", 42, "t"))
        await writer.drain()
        name, seqid, text, got_code = _exception_text(await _read_message(reader, False))
        assert (name, seqid, got_code) == ("get_table", 42, code)
        assert words in text and "Basic realm refused" in text
        assert any(words in r.getMessage() for r in caplog.records)
        # The connection stays usable once the gateway answers again.
        fake.status = 200
        writer.write(_call("get_table", 43, "u"))
        await writer.drain()
        assert await _read_message(reader, False) == _reply_to(_call("get_table", 43, "u"))


async def test_gateway_unreachable_then_back(certs):
    async with Running(certs) as r:
        reader, writer = r.reader, r.writer
        writer.write(_call("get_table", 1, "a"))
        assert await _read_message(reader, False) == _reply_to(_call("get_table", 1, "a"))
        await r.runner.cleanup()  # the gateway goes away (a restart)
        writer.write(_call("create_table", 2, "b"))
        name, seqid, text, code = _exception_text(await _read_message(reader, False))
        assert (name, seqid, code) == ("create_table", 2, INTERNAL_ERROR)
        assert "gateway unreachable" in text
        # ... and comes back on the same port: the same client connection works again.
        r.runner, _ = await _start_fake(certs, r.fake, r.gateway_port)
        writer.write(_call("get_table", 3, "c"))
        assert await _read_message(reader, False) == _reply_to(_call("get_table", 3, "c"))


async def test_malformed_call_closes_the_connection(certs):
    async with Running(certs) as r:
        reader, writer = r.reader, r.writer
        writer.write(b"GET / HTTP/1.1\r\n\r\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 30) == b""
        assert r.fake.seen == []


def test_listen_address_guard():
    check_listen_address("127.0.0.1", False)
    check_listen_address("::1", False)
    check_listen_address("localhost", False)
    check_listen_address("0.0.0.0", True)
    with pytest.raises(ValueError, match="--allow-remote"):
        check_listen_address("0.0.0.0", False)
    with pytest.raises(ValueError, match="--allow-remote"):
        check_listen_address("10.1.2.3", False)


def test_spark_setting():
    assert spark_setting("127.0.0.1", 9083) == "spark.hadoop.hive.metastore.uris=thrift://127.0.0.1:9083"


def test_plain_http_gateway_refused(certs):
    with pytest.raises(ValueError, match="https://"):
        Tunnel(TunnelSettings("http://localhost:1/gateway/t/svc", None))


async def test_reply_cut_midway_ends_the_client_connection(certs, caplog):
    async with Running(certs) as r:
        r.fake.cut = True
        r.writer.write(_call("get_partitions", 5, "t"))
        data = b""
        while chunk := await asyncio.wait_for(r.reader.read(65536), 30):
            data += chunk
        assert 0 < len(data) < 200_000  # part of it, then the end of the connection
        assert any("reply cut after" in rec.getMessage() for rec in caplog.records)


async def test_kerberos_keeps_the_gateways_session_cookie(certs, monkeypatch):
    from hms_gateway_client.auth import KerberosAuth

    monkeypatch.setattr(KerberosAuth, "headers", lambda self, host: {"Authorization": "Negotiate dG9rZW4="})
    async with Running(certs, auth=KerberosAuth()) as r:
        r.fake.set_cookie = "hadoop.auth=signed-session; Secure; HttpOnly"
        for seqid in (1, 2):
            r.writer.write(_call("get_table", seqid, "t"))
            await _read_message(r.reader, False)
        first, second = (headers for headers, _ in r.fake.seen)
        assert "Cookie" not in first
        assert second["Cookie"] == "hadoop.auth=signed-session"
        assert second["Authorization"] == "Negotiate dG9rZW4="  # the token still goes along


async def test_basic_keeps_no_cookie(certs):
    async with Running(certs) as r:
        r.fake.set_cookie = "hadoop.auth=signed-session; Secure; HttpOnly"
        for seqid in (1, 2):
            r.writer.write(_call("get_table", seqid, "t"))
            await _read_message(r.reader, False)
        assert all("Cookie" not in headers for headers, _ in r.fake.seen)


# --- start-up: the tunnel asks once, and says why it will not serve ------------------------------


class StrictFake(FakeGateway):
    """Authenticates before reading the body, as the gateway does: 401 for a wrong password,
    else 400 for an empty (malformed) body."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != BasicAuth("etl", "pw").headers("x")["Authorization"]:
            return web.Response(status=401, text="no valid credentials\n")
        if not await request.read():
            return web.Response(status=400, text="malformed Thrift message: empty body\n")
        return await super().handle(request)


@pytest.mark.parametrize("password, refusal", [
    ("pw", None),
    ("wrong", "gateway refused the credentials (HTTP 401): no valid credentials"),
])
async def test_run_tunnel_checks_the_credentials_once_at_start(certs, password, refusal):
    from hms_gateway_client.tunnel import TunnelRefused, run_tunnel

    fake = StrictFake()
    runner, port = await _start_fake(certs, fake)
    announced: list[str] = []
    settings = _settings(port, certs, auth=BasicAuth("etl", password))
    try:
        task = asyncio.ensure_future(run_tunnel(settings, announce=announced.append))
        if refusal is None:
            while not announced:
                await asyncio.sleep(0.01)
            assert announced[0].startswith("tunnel listening on 127.0.0.1:")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            with pytest.raises(TunnelRefused) as refused:
                await task
            assert str(refused.value) == refusal
            assert announced == []
        assert [body for _, body in fake.seen] == []  # StrictFake records only bodies it served
    finally:
        await runner.cleanup()


async def test_a_gateway_certificate_not_trusted_says_pass_ca(certs, tmp_path, caplog):
    other = write_dev_certificates(tmp_path / "other-ca")  # a CA that did not sign the gateway's
    runner, port = await _start_fake(certs, FakeGateway())
    settings = TunnelSettings(f"https://localhost:{port}/gateway/t/svc", BasicAuth("etl", "pw"),
                              ca=str(other.ca_certificate), port=0)
    from hms_gateway_client.tunnel import TunnelRefused, run_tunnel

    try:
        with pytest.raises(TunnelRefused, match=r"^certificate not trusted: pass --ca with the CA bundle"):
            await run_tunnel(settings, announce=lambda line: None)
        tunnel = Tunnel(settings)  # and per call, when it was started without the check
        await tunnel.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", tunnel.port)
            writer.write(_call("get_table", 5, "t"))
            _, _, text, code = _exception_text(await _read_message(reader, False))
            assert text.startswith("certificate not trusted: pass --ca") and code == UNKNOWN
            writer.close()
        finally:
            await tunnel.close()
    finally:
        await runner.cleanup()


def test_cmd_tunnel_with_a_missing_ca_names_the_file(tmp_path, capsys, monkeypatch):
    from hms_gateway_client.cli import main

    monkeypatch.setenv("NOPE_PW", "secret")
    missing = tmp_path / "ca.pem"
    assert main(["--gateway", "https://localhost:1/gateway/t/svc", "--listen", "127.0.0.1:0",
                 "--auth", "basic", "--user", "u", "--password-env", "NOPE_PW", "--ca", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"tunnel: cannot load TLS files: no such CA bundle file: {missing}"
