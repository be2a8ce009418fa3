"""A thousand change-feed subscribers on one gateway cost one upstream poll per interval
(issue 12, "Done means"), read from the gateway's own metrics; no timing bound.

Real HMS 2.3 with the project's listener, the real gateway, 1,000 concurrent SSE clients over
HTTPS. While they are all connected, two DDL calls reach every one of them, and the upstream
calls the gateway made meanwhile are its poll cycles' calls, not one per subscriber.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tests.support.feed import EVENTS_PATH, SSE, SSEReader, auth, feed_metrics, start_feed_gateway

pytestmark = pytest.mark.integration

SUBSCRIBERS = 1000


async def wait_for_subscribers(gw, count: int, streams: list[asyncio.Task]) -> dict[str, float]:
    """Scrape until the gateway counts ``count`` subscribers (fails early if a stream failed)."""
    for _ in range(3000):  # a generous bound against hanging, not a timing assertion
        for task in streams:
            if task.done():
                task.result()  # raises what went wrong in that subscriber
        scraped = await asyncio.to_thread(feed_metrics, gw)
        if scraped["subscribers"] >= count:
            return scraped
        await asyncio.sleep(0.1)
    raise AssertionError(f"the gateway counts {scraped['subscribers']:.0f} of {count} subscribers")


async def follow(session: aiohttp.ClientSession, url: str, events: int) -> list[str]:
    """One SSE subscriber: the types of the first ``events`` events it receives."""
    async with session.get(url, headers={**auth("admin"), **SSE}) as response:
        assert response.status == 200, await response.text()
        reader = SSEReader(response)
        return [json.loads((await reader.next(timeout=600))["data"])["eventType"] for _ in range(events)]


async def test_a_thousand_subscribers_cost_one_upstream_poll_per_interval(feed_hms, catalog, gateway_factory):
    gw = start_feed_gateway(gateway_factory, feed_hms)
    after = await asyncio.to_thread(catalog.current_id)
    url = gw.url(path=EVENTS_PATH) + f"?after={after}"
    connector = aiohttp.TCPConnector(ssl=gw.ssl_context(), limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None, sock_connect=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        # One login first: the others then hit the credential cache. A thousand bcrypt checks
        # at once from one address would be refused by the failure throttle (checks in
        # flight count against it), rightly.
        async with session.get(url, headers=auth("admin")) as r:
            assert r.status == 200, await r.text()
        streams = [asyncio.create_task(follow(session, url, 2)) for _ in range(SUBSCRIBERS)]
        before = await wait_for_subscribers(gw, SUBSCRIBERS, streams)
        assert before["subscribers"] == SUBSCRIBERS
        await asyncio.to_thread(catalog.create_database, "scale_db")
        await asyncio.to_thread(catalog.create_table, "scale_db", "t")
        received = await asyncio.gather(*streams)
        after_scrape = await asyncio.to_thread(feed_metrics, gw)
    assert received == [["CREATE_DATABASE", "CREATE_TABLE"]] * SUBSCRIBERS
    polls = after_scrape["polls"] - before["polls"]
    upstream = after_scrape["upstream"] - before["upstream"]
    assert after_scrape["delivered"] - before["delivered"] == 2 * SUBSCRIBERS
    assert polls >= 1
    # Each poll cycle is one get_current_notificationEventId, plus one get_next_notification
    # in the (at most two) cycles that found the new events; a cycle in flight at either scrape
    # may have made up to two calls not yet counted as a poll. Nothing per subscriber.
    assert polls - 2 <= upstream <= polls + 4, (polls, upstream)
