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
from gateway.upstream.pool import UpstreamPool
from tests.support.fake_hms import CALL, REPLY, FakeHMS


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


@pytest.mark.parametrize("framed", [False, True], ids=["unframed", "framed"])
@pytest.mark.parametrize("behaviour, reason", [
    ("wrong-seqid", "reply to another call"),
    ("wrong-name", "reply to another call"),
    ("extra-reply", "after the reply"),
])
async def test_a_reply_that_does_not_answer_the_call_is_refused_and_its_connection_dropped(
        framed, behaviour, reason):
    """Thrift clients check name and seqid of every reply (TServiceClient.receiveBase); the pool
    does too, with seqids of its own, so a stray reply never reaches another caller."""
    async with FakeHMS([behaviour], framed=framed) as hms:
        pool = UpstreamPool(hms.url, framed=framed)
        if behaviour == "extra-reply" and framed:
            # framed: the first frame is a whole reply; the second one waits unread on the socket
            assert await pool.call(CALL) == REPLY
        else:
            with pytest.raises(UpstreamBadReply, match=reason):
                await pool.call(CALL)
        assert await pool.call(CALL) == REPLY  # the next call is right, on a fresh connection
        assert hms.connections == 2
        await pool.close()


async def test_a_late_stray_reply_on_an_idle_connection_is_never_handed_out():
    async with FakeHMS(["late-extra-reply"]) as hms:
        pool = UpstreamPool(hms.url)
        assert await pool.call(CALL) == REPLY
        await asyncio.sleep(0.5)  # the stray reply lands on the idle connection
        for _ in range(3):
            assert await pool.call(CALL) == REPLY
        assert hms.connections == 2
        await pool.close()


async def test_the_upstream_sees_the_gateways_seqids_and_the_caller_gets_its_own():
    seen: list[int] = []

    class Recording(FakeHMS):
        async def _serve(self, reader, writer):
            original = reader.readexactly

            async def readexactly(n):
                data = await original(n)
                if n == len(CALL):
                    seen.append(struct.unpack_from("!i", data, 8 + len("get_all_databases"))[0])
                return data
            reader.readexactly = readexactly
            await super()._serve(reader, writer)

    async with Recording() as hms:
        pool = UpstreamPool(hms.url)
        for _ in range(3):
            assert await pool.call(CALL) == REPLY  # CALL and REPLY carry seqid 1
        assert len(set(seen)) == 3
        await pool.close()


async def test_after_a_oneway_call_the_connection_is_not_reused():
    async with FakeHMS() as hms:
        pool = UpstreamPool(hms.url)
        assert await pool.call(CALL, expect_reply=False) is None
        assert not pool._idle
        assert await pool.call(CALL) == REPLY
        await pool.close()
