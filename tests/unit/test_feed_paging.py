"""The change feed's paging contract (issue 25): ``limit`` counts delivered events, the scan goes
past filtered ones to the ring's newest, and a client that continues from ``next`` never misses
an event; a misspelt event type or a table without its database is a 400, not an empty list."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.events.feed import EVENT_TYPES, ChangeFeed, Resync
from gateway.upstream.notification_event import MetastoreEvent
from gateway.services.event_stream import BadQuery, _Query


def event(i: int, kind: str, db: str = "sales", table: str | None = "t") -> MetastoreEvent:
    return MetastoreEvent(i, 1000, kind, db, table, {}, "json-0.2")


#: ids 1-12: three rounds of CREATE_TABLE, ADD_PARTITION, ALTER_TABLE on sales, then one on other.
EVENTS = [event(1 + 4 * r + k, kind, db) for r in range(3)
          for k, (kind, db) in enumerate([("CREATE_TABLE", "sales"), ("ADD_PARTITION", "sales"),
                                          ("ALTER_TABLE", "sales"), ("CREATE_TABLE", "other")])]


def feed_with(events: list[MetastoreEvent], ring_size: int = 100) -> ChangeFeed:
    feed = ChangeFeed(poller=None, ring_size=ring_size)  # type: ignore[arg-type]  # never polls here
    feed.ring.reset(0)
    feed.ring.extend(events)
    feed.ready = True
    return feed


def sales_tables(e: MetastoreEvent) -> bool:
    return e.db == "sales" and e.event_type == "CREATE_TABLE"


def test_limit_counts_delivered_events_not_scanned_ones():
    feed = feed_with(EVENTS)
    events, position = feed.select(0, 2, sales_tables)
    assert [e.event_id for e in events] == [1, 5] and position == 5
    events, position = feed.select(position, 2, sales_tables)
    assert [e.event_id for e in events] == [9] and position == 12  # scanned to the newest


def test_without_a_filter_limit_is_the_number_of_events():
    feed = feed_with(EVENTS)
    events, position = feed.select(3, 4, lambda e: True)
    assert [e.event_id for e in events] == [4, 5, 6, 7] and position == 7


def test_nothing_new_keeps_the_position_and_nothing_matching_moves_it_to_the_newest():
    feed = feed_with(EVENTS)
    assert feed.select(12, 5, lambda e: True) == ([], 12)
    assert feed.select(0, 5, lambda e: False) == ([], 12)


@pytest.mark.parametrize("limit", [1, 2, 3, 7])
def test_paging_with_next_collects_every_matching_event_once(limit):
    feed = feed_with(EVENTS + [event(13 + i, "ADD_PARTITION") for i in range(1500)], ring_size=5000)
    matching = [e.event_id for e in feed.ring.after(0, 10_000) if e.event_type == "ADD_PARTITION"]
    collected, position = [], 0
    while position < feed.latest_id:
        events, position = feed.select(position, limit, lambda e: e.event_type == "ADD_PARTITION")
        collected += [e.event_id for e in events]
    assert collected == matching


def test_select_keeps_the_resync_rules():
    feed = feed_with(EVENTS, ring_size=4)  # keeps 9-12: events after 0..7 are gone
    with pytest.raises(Resync):
        feed.select(3, 1, lambda e: True)
    with pytest.raises(Resync):
        feed.select(13, 1, lambda e: True)


async def test_wait_select_returns_a_later_matching_event_and_the_position_after_it():
    feed = feed_with(EVENTS)
    waiting = asyncio.ensure_future(feed.wait_select(12, 5, 3, sales_tables))
    await asyncio.sleep(0.05)
    feed.ring.extend([event(13, "ALTER_TABLE")])  # not matching: keeps waiting
    feed._wake()
    await asyncio.sleep(0.05)
    assert not waiting.done()
    feed.ring.extend([event(14, "CREATE_TABLE")])
    feed._wake()
    events, position = await asyncio.wait_for(waiting, 5)
    assert [e.event_id for e in events] == [14] and position == 14


async def test_wait_select_times_out_with_the_position_past_filtered_events():
    feed = feed_with(EVENTS)
    assert await feed.wait_select(0, 0.05, 3, lambda e: False) == ([], 12)


# --- query checks -------------------------------------------------------------------------------


def query(qs: str, known=EVENT_TYPES) -> _Query:
    return _Query(make_mocked_request("GET", "/gateway/default/events?" + qs), 60, False, known)


def test_a_misspelt_type_is_refused_naming_the_known_types():
    with pytest.raises(BadQuery) as refused:
        query("types=ADD_PARTITON,create_table")
    assert str(refused.value).startswith("unknown event type ADD_PARTITON in types; known types: ")
    assert "ADD_PARTITION" in str(refused.value) and "CREATE_TABLE" in str(refused.value)
    assert query("types=add_partition, CREATE_TABLE").types == {"ADD_PARTITION", "CREATE_TABLE"}


def test_a_type_the_feed_has_read_from_hms_is_known():
    feed = feed_with([])
    feed._seen_types.add("HIVE5_NEW_EVENT")
    assert query("types=HIVE5_NEW_EVENT", feed.known_types()).types == {"HIVE5_NEW_EVENT"}


def test_table_needs_db():
    with pytest.raises(BadQuery, match="table needs db"):
        query("table=orders")
    assert (query("db=Sales&table=Orders").db, query("db=Sales&table=Orders").table) == ("sales", "orders")
