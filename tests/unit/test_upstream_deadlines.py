"""One timer for the deadlines of a pool's calls (gateway.upstream.deadlines): each call ends at
its own deadline with ``TimeoutError``, other cancellations still propagate, and the pool keeps
one timer whatever the number of calls."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.upstream.deadlines import Deadlines
from gateway.upstream.errors import UpstreamTimeout
from gateway.upstream.pool import UpstreamPool
from tests.support.fake_hms import CALL, REPLY, FakeHMS


async def guarded(deadlines: Deadlines, seconds: float) -> str:
    """A call that takes ``seconds``, watched as the pool watches its calls."""
    with deadlines.watch():
        await asyncio.sleep(seconds)
        return "done"


async def test_a_call_past_its_deadline_raises_timeout_error_and_others_finish():
    deadlines = Deadlines(0.2)
    started = time.monotonic()
    slow = asyncio.create_task(guarded(deadlines, 5))
    fast = [asyncio.create_task(guarded(deadlines, 0.01)) for _ in range(3)]
    assert await asyncio.gather(*fast) == ["done"] * 3
    with pytest.raises(TimeoutError):
        await slow
    assert 0.15 < time.monotonic() - started < 2  # at its deadline, not at the end of its sleep
    assert len(deadlines) == 0


async def test_each_call_times_out_at_its_own_deadline_after_older_ones_ended():
    deadlines = Deadlines(0.3)
    first = asyncio.create_task(guarded(deadlines, 0.05))  # arms the timer for t0 + 0.3
    await asyncio.sleep(0.1)
    second_started = time.monotonic()
    second = asyncio.create_task(guarded(deadlines, 5))  # deadline t0 + 0.4: re-armed after the first fires
    assert await first == "done"
    with pytest.raises(TimeoutError):
        await second
    assert time.monotonic() - second_started >= 0.28


async def test_one_timer_for_many_calls():
    deadlines = Deadlines(60)
    tasks = [asyncio.create_task(guarded(deadlines, 0.01)) for _ in range(50)]
    await asyncio.sleep(0)
    timer = deadlines._timer
    assert timer is not None and len(deadlines) == 50
    await asyncio.gather(*tasks)
    more = [asyncio.create_task(guarded(deadlines, 0.01)) for _ in range(50)]
    await asyncio.sleep(0)
    assert deadlines._timer is timer  # not one per call: the first one stays armed
    await asyncio.gather(*more)


async def test_a_cancellation_from_elsewhere_stays_a_cancellation():
    deadlines = Deadlines(60)
    task = asyncio.create_task(guarded(deadlines, 5))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(deadlines) == 0


async def test_a_cancellation_from_elsewhere_at_the_deadline_still_propagates():
    # As asyncio.timeout(): when the task was also cancelled by someone else, CancelledError wins.
    deadlines = Deadlines(0.05)

    async def cancelled_twice() -> None:
        asyncio.current_task().cancel()  # a pending cancellation from elsewhere
        await guarded(deadlines, 5)

    task = asyncio.create_task(cancelled_twice())
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_pool_timeout_then_the_next_call_keeps_its_own_deadline():
    async with FakeHMS("silent") as silent, FakeHMS() as good:
        slow = UpstreamPool(silent.url, timeout=0.3)
        fast = UpstreamPool(good.url, timeout=0.3)
        with pytest.raises(UpstreamTimeout, match="did not answer within 0.3 s"):
            await slow.call(CALL)
        for _ in range(3):  # after a timeout the pool's timer serves the next calls as before
            assert await fast.call(CALL) == REPLY
        with pytest.raises(UpstreamTimeout):
            await slow.call(CALL)
        await slow.close()
        await fast.close()


def test_deadlines_used_on_a_new_event_loop_still_time_out():
    deadlines = Deadlines(0.1)

    async def first_loop() -> None:
        deadlines.timeout = 60
        with deadlines.watch():  # arms a timer on this loop, which then closes with it pending
            pass

    async def second_loop() -> None:
        deadlines.timeout = 0.1
        with pytest.raises(TimeoutError):
            await guarded(deadlines, 5)

    asyncio.run(first_loop())
    asyncio.run(second_loop())
