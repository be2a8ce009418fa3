"""The Hive 4 HTTP-mode upstream checks that each reply answers its call, as the TCP pool does."""

from __future__ import annotations

import struct

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.upstream.errors import UpstreamBadReply
from gateway.upstream.http import HttpUpstream
from tests.support.fake_hms import CALL, REPLY, answer


async def _serving(mangle):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=mangle(answer(await request.read())), content_type="application/x-thrift")

    app = web.Application()
    app.router.add_post("/metastore", handler)
    return TestServer(app)


@pytest.mark.parametrize("mangle, reason", [
    (lambda r: r, None),
    (lambda r: r[:25] + struct.pack("!i", struct.unpack_from("!i", r, 25)[0] + 1) + r[29:], "another call"),
    (lambda r: r.replace(b"get_all_databases", b"get_all_functions"), "another call"),
    (lambda r: r[:3] + b"\x01" + r[4:], "no reply"),  # a CALL, not a REPLY
])
async def test_reply_must_answer_the_call(mangle, reason):
    async with await _serving(mangle) as server:
        upstream = HttpUpstream(str(server.make_url("/metastore")))
        try:
            if reason is None:
                assert await upstream.call(CALL) == REPLY  # the caller's seqid comes back
            else:
                with pytest.raises(UpstreamBadReply, match=reason):
                    await upstream.call(CALL)
        finally:
            await upstream.close()
