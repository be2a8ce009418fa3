"""HA over several upstreams: ordered failover, read-only retries, down marking, probing, round-robin."""

from __future__ import annotations

import asyncio

import pytest

from gateway.upstream.errors import UpstreamTimeout
from gateway.upstream.failover import Upstream
from gateway.upstream.pool import UpstreamPool
from tests.support.fake_hms import CALL, REPLY, FakeHMS


async def closed_url() -> str:
    async with FakeHMS() as gone:
        return gone.url


async def test_failover_when_the_first_refuses():
    async with FakeHMS() as good:
        up = Upstream([UpstreamPool(await closed_url()), UpstreamPool(good.url)], failover_sleep=0)
        assert await up.call(CALL) == REPLY
        await up.close()


async def test_a_sent_write_is_never_retried_but_a_read_is():
    async with FakeHMS() as good, FakeHMS("silent") as silent:
        up = Upstream([UpstreamPool(silent.url, timeout=0.2), UpstreamPool(good.url)],
                      failover_sleep=0, probe_interval=60)
        with pytest.raises(UpstreamTimeout):
            await up.call(CALL, read_only=False)
        assert good.requests == 0 and (f"127.0.0.1:{silent.port}" in up._down)
        up._down.clear()
        assert await up.call(CALL, read_only=True) == REPLY
        assert good.requests == 1
        await up.close()


async def test_down_upstream_is_skipped_then_probed_back():
    async with FakeHMS() as good:
        dead = await closed_url()
        first = UpstreamPool(dead)
        up = Upstream([first, UpstreamPool(good.url)], failover_sleep=0, probe_interval=0.05)
        assert await up.call(CALL) == REPLY
        assert (first.label in up._down)
        before = good.requests
        assert await up.call(CALL) == REPLY
        assert good.requests == before + 1  # went straight to the healthy one
        # The dead upstream comes back on its port: the background probe notices.
        back = await asyncio.start_server(FakeHMS()._serve, first.host, first.port)
        for _ in range(100):
            if not (first.label in up._down):
                break
            await asyncio.sleep(0.05)
        assert not (first.label in up._down)
        back.close()
        await up.close()


async def test_round_robin_spreads_calls():
    async with FakeHMS() as a, FakeHMS() as b:
        up = Upstream([UpstreamPool(a.url), UpstreamPool(b.url)], round_robin=True)
        for _ in range(6):
            assert await up.call(CALL) == REPLY
        assert a.requests == 3 and b.requests == 3
        await up.close()


async def test_attempts_are_bounded():
    urls = [await closed_url() for _ in range(4)]
    up = Upstream([UpstreamPool(u) for u in urls], max_failover_attempts=2, failover_sleep=0,
                  probe_interval=60)
    with pytest.raises(Exception, match="cannot connect"):
        await up.call(CALL)
    assert len(up._down) == 2
    await up.close()
