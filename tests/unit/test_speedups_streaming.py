"""The pool streams a reply into a ReplySink: output leaves before the reply has all arrived,
errors keep their meaning before the first byte, and a retry after it is refused."""

from __future__ import annotations

import asyncio

import pytest

from gateway.thrift.schema import load_schema
from gateway.thrift.reply_translator import reply_translator
from gateway.thrift.translate import binary_reply_to_tjson
from gateway.upstream.errors import UpstreamBadReply, UpstreamUnavailable
from gateway.upstream.pool import UpstreamPool
from gateway.upstream.streaming import ClientGone, ReplySink, StreamBroken
from tests.support.fake_hms import ScriptedServer, CALL, answer, list_of_strings_reply

BIG = list_of_strings_reply("get_all_databases", 1, [f"db{i:05d}-" + "x" * 500 for i in range(4000)])  # ~2 MB


class _Ended:
    """Stands for the started response: records that it was ended."""

    ended = False

    async def write_eof(self) -> None:
        self.ended = True


class RecordingSink(ReplySink):
    """A sink whose client is a list: records each write and how much reply had arrived then."""

    def __init__(self, server: "ScriptedHMS"):
        schema = load_schema()
        super().__init__(None, lambda m: reply_translator(schema, m, 9), "x",  # type: ignore[arg-type]
                         flush_bytes=64 * 1024)
        self.server = server
        self.writes: list[tuple[int, bytes]] = []

    async def _write(self, data: bytes) -> None:
        if self.response is None:
            self.response = _Ended()  # type: ignore[assignment]  # "started"
        self.writes.append((self.server.sent, data))
        self.sent += len(data)


class ScriptedHMS(ScriptedServer):
    """Answers one CALL with ``reply`` in 64 KiB pieces; ``cut`` closes after that many bytes."""

    def __init__(self, reply: bytes, cut: int | None = None, echo_seqid: bool = True):
        self.reply, self.cut, self.sent, self.echo_seqid = reply, cut, 0, echo_seqid

    async def _serve(self, reader, writer):
        try:
            call = await reader.readexactly(len(CALL))
            reply = answer(call, self.reply) if self.echo_seqid else self.reply
            end = len(reply) if self.cut is None else self.cut
            for i in range(0, end, 65536):
                piece = reply[i:min(i + 65536, end)]
                writer.write(piece)
                await writer.drain()
                self.sent += len(piece)
                await asyncio.sleep(0)
            if self.cut is not None:
                writer.close()
                return
            await reader.read()  # keep the connection open for reuse
        except (asyncio.IncompleteReadError, ConnectionError):
            pass


async def test_reply_streams_before_it_has_all_arrived():
    async with ScriptedHMS(BIG) as hms:
        pool = UpstreamPool(hms.url)
        sink = RecordingSink(hms)
        head = await pool.call(CALL, sink=sink)
        assert sink.done and BIG.startswith(head) and sink.response.ended and sink.gone is None
        body = b"".join(data for _, data in sink.writes)  # the pool completed the response
        assert body == binary_reply_to_tjson(BIG, load_schema(), seqid=9)
        assert sink.writes and sink.writes[0][0] < len(BIG)  # first write while the reply was arriving
        assert len(sink.writes) > 5
        await pool.close()


async def test_reply_to_another_call_is_refused_before_anything_is_streamed():
    async with ScriptedHMS(BIG, echo_seqid=False) as hms:  # answers with seqid 1, not the gateway's
        pool = UpstreamPool(hms.url)
        sink = RecordingSink(hms)
        with pytest.raises(UpstreamBadReply, match="reply to another call"):
            await pool.call(CALL, sink=sink)
        assert not sink.writes and sink.response is None
        assert not pool._idle  # the connection is discarded, never reused
        await pool.close()


async def test_connection_lost_after_start_is_unavailable_and_retry_is_refused():
    async with ScriptedHMS(BIG, cut=len(BIG) // 2) as hms:
        pool = UpstreamPool(hms.url)
        sink = RecordingSink(hms)
        with pytest.raises(UpstreamUnavailable):
            await pool.call(CALL, sink=sink)
        assert sink.response is not None and not sink.done
        with pytest.raises(StreamBroken):
            sink.begin(1 << 20)  # a failover retry cannot restart a reply already on the wire
        await pool.close()


async def test_malformed_reply_before_start_is_bad_reply():
    async with ScriptedHMS(b"\x00" * 64) as hms:
        pool = UpstreamPool(hms.url)
        sink = RecordingSink(hms)
        with pytest.raises(UpstreamBadReply, match="bad binary message version"):
            await pool.call(CALL, sink=sink)
        assert sink.response is None
        await pool.close()


async def _serve_through_sink(hms_url: str):
    """A real aiohttp server whose handler streams the pool's reply through a ReplySink the way
    ``ThriftRpcService`` does; returns the client's view: (status, body or the error it saw)."""
    import aiohttp
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from gateway.upstream.errors import UpstreamError

    pool = UpstreamPool(hms_url)
    schema = load_schema()

    async def handler(request: web.Request) -> web.StreamResponse:
        sink = ReplySink(request, lambda m: reply_translator(schema, m, 9),
                         "application/vnd.apache.thrift.json", flush_bytes=64 * 1024)
        try:
            await pool.call(CALL, sink=sink)
        except UpstreamError as exc:
            if sink.response is not None:
                sink.abort()
                return sink.response
            return web.Response(status=exc.status, text=str(exc))
        assert sink.gone is None
        return sink.response

    app = web.Application()
    app.router.add_post("/", handler)
    async with TestServer(app) as server, aiohttp.ClientSession() as session:
        async with session.post(server.make_url("/"), data=b"x") as response:
            try:
                return response.status, await response.read()
            except aiohttp.ClientPayloadError as exc:
                return response.status, exc
            finally:
                await pool.close()


async def test_http_response_is_chunked_tjson():
    async with ScriptedHMS(BIG) as hms:
        status, body = await _serve_through_sink(hms.url)
    assert status == 200
    assert body == binary_reply_to_tjson(BIG, load_schema(), seqid=9)


async def test_http_response_cut_mid_reply_is_incomplete_for_the_client():
    import aiohttp

    async with ScriptedHMS(BIG, cut=len(BIG) // 2) as hms:
        status, body = await _serve_through_sink(hms.url)
    assert status == 200  # the headers had gone out
    assert isinstance(body, aiohttp.ClientPayloadError)  # not a complete-looking truncated body


async def test_http_error_before_first_byte_is_plain_502():
    async with ScriptedHMS(BIG, cut=1000) as hms:  # less than one flush: nothing was sent yet
        status, body = await _serve_through_sink(hms.url)
    assert status == 502 and b"closed the connection" in body


# --- binary pass-through (strict-binary clients) ------------------------------------------------

def _binary_reply(name: str, seqid: int, payload: bytes) -> bytes:
    from gateway.thrift.binary import REPLY, write_message_header

    out = bytearray()
    write_message_header(out, name, REPLY, seqid)
    return bytes(out) + payload


@pytest.mark.parametrize("size", [1, 3, 7, 64, 4096])
def test_binary_passthrough_rewrites_only_the_seqid_whatever_the_chunking(size):
    from gateway.thrift.codec import BinaryCodec
    from gateway.thrift.reply_translator import binary_passthrough
    from gateway.thrift.schema import load_schema

    # a list<string> success of 500 names: field 0, type LIST
    names = [f"db{i}".encode() for i in range(500)]
    payload = b"\x0f\x00\x00\x0b" + len(names).to_bytes(4, "big")
    payload += b"".join(len(n).to_bytes(4, "big") + n for n in names) + b"\x00"
    reply = _binary_reply("get_all_databases", 77, payload)
    translator = binary_passthrough(len(reply), seqid=-5)
    out, end = b"", None
    stream = reply + b"trailing bytes of the next message"
    for i in range(0, len(stream), size):
        end = translator.feed(stream[i:i + size]) if end is None else end
        out += translator.take()
    out += translator.take()
    assert end == len(reply)
    assert out == BinaryCodec().encode_reply(reply, load_schema(), -5)
    assert out != reply and len(out) == len(reply)


def test_binary_passthrough_refuses_what_the_scanner_refuses():
    from gateway.thrift.errors import ProtocolError
    from gateway.thrift.reply_translator import binary_passthrough

    reply = _binary_reply("get_all_databases", 1, b"\x0b\x00\x00" + (10_000).to_bytes(4, "big") + b"x" * 10_000 + b"\x00")
    with pytest.raises(ProtocolError):
        binary_passthrough(1000, seqid=1).feed(reply)


async def test_client_gone_at_the_end_keeps_the_upstream_connection():
    """The reply was read whole: the client's departure is recorded for the dispatch, and the
    upstream connection, which holds nothing unread, goes back to the pool."""

    class Reset(_Ended):
        async def write_eof(self) -> None:
            raise ConnectionResetError("peer reset")

    class ResetSink(RecordingSink):
        async def _write(self, data: bytes) -> None:
            if self.response is None:
                self.response = Reset()  # type: ignore[assignment]
            await super()._write(data)

    async with ScriptedHMS(BIG) as hms:
        pool = UpstreamPool(hms.url)
        sink = ResetSink(hms)
        await pool.call(CALL, sink=sink)
        assert sink.done and isinstance(sink.gone, ClientGone) and "peer reset" in str(sink.gone)
        assert len(pool._idle) == 1
        await pool.close()
