"""The table queue's memory of the last alter (gateway/upstream/table_queue.py, issue 33): a
commit waiting behind another takes the table that one altered as the table at its turn only
when that alter was sent after the waiter's own read of HMS; nothing outlives the queue."""

from __future__ import annotations

import asyncio
import time

from gateway.upstream import table_queue


async def test_a_waiter_takes_the_table_altered_after_its_read_and_only_that():
    early_read = time.monotonic()  # a waiter that read HMS before the alter below was sent
    holding, release = asyncio.Event(), asyncio.Event()
    seen = {}

    async def holder():
        async with table_queue.queued("db", "t"):
            holding.set()
            await release.wait()
            sent = time.monotonic()
            table_queue.altered("db", "t", "table after the alter", sent)
        return sent

    async def waiter(name: str, read: float):
        async with table_queue.queued("db", "t") as behind:
            assert behind
            seen[name] = table_queue.altered_since("db", "t", read)

    first = asyncio.ensure_future(holder())
    await holding.wait()
    waiters = [asyncio.ensure_future(waiter("early", early_read))]
    await asyncio.sleep(0)
    late_read = time.monotonic() + 3600  # a read that returned after the alter was sent
    waiters.append(asyncio.ensure_future(waiter("late", late_read)))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *waiters)
    assert seen == {"early": "table after the alter", "late": None}
    assert table_queue._local == {}  # the memory ends with the queue
    assert table_queue.altered_since("db", "t", early_read) is None


async def test_an_alter_nobody_waits_for_is_not_kept_and_another_table_is_not_touched():
    async with table_queue.queued("db", "t"):
        table_queue.altered("db", "t", "t altered", time.monotonic())
        assert table_queue.altered_since("db", "other", 0.0) is None
    table_queue.altered("db", "t", "outside any turn", time.monotonic())  # no entry: dropped
    async with table_queue.queued("db", "t"):
        assert table_queue.altered_since("db", "t", 0.0) is None
    assert table_queue._local == {}
