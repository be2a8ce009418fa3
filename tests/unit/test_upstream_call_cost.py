"""Per-call costs of the upstream pool that a test can see (issue 14): no async generator is
started per call, whether the reply is read whole or streamed into a sink, framed or not. An
async generator left unfinished is closed by the event loop's finaliser hook, which costs each
call a ``call_soon_threadsafe`` wake-up and a task."""

from __future__ import annotations

import sys

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.thrift.reply_translator import reply_translator
from gateway.thrift.schema import load_schema
from gateway.thrift.translate import binary_reply_to_tjson
from gateway.upstream.pool import UpstreamPool
from gateway.upstream.streaming import ReplySink
from tests.support.fake_hms import CALL, REPLY, FakeHMS


class _CountingAsyncgenHooks:
    """Counts async generators started while installed (``sys.set_asyncgen_hooks``)."""

    def __enter__(self):
        self.started = 0
        self.saved = sys.get_asyncgen_hooks()
        firstiter = self.saved.firstiter

        def counting(agen):
            self.started += 1
            if firstiter is not None:
                firstiter(agen)

        sys.set_asyncgen_hooks(firstiter=counting, finalizer=self.saved.finalizer)
        return self

    def __exit__(self, *exc):
        sys.set_asyncgen_hooks(*self.saved)


@pytest.mark.parametrize("framed", [False, True], ids=["unframed", "framed"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "sink"])
async def test_no_async_generator_per_call(framed, streamed):
    schema = load_schema()
    async with FakeHMS(framed=framed) as hms:
        pool = UpstreamPool(hms.url, framed=framed)
        await pool.call(CALL)  # the connection is opened outside the count
        with _CountingAsyncgenHooks() as hooks:
            for _ in range(5):
                if streamed:
                    sink = ReplySink(make_mocked_request("POST", "/"), lambda m: reply_translator(schema, m, 1),
                                     "application/vnd.apache.thrift.json", {"X-Request-Id": "rid"})
                    await pool.call(CALL, sink=sink)
                    assert sink.done and sink.gone is None
                    response = sink.response  # a small reply: a plain response, sent by the pool
                    assert response.prepared and response.headers["X-Request-Id"] == "rid" and response.body == binary_reply_to_tjson(REPLY, schema, seqid=1)
                else:
                    assert await pool.call(CALL) == REPLY
        assert hooks.started == 0
        assert hms.connections == 1
        await pool.close()
