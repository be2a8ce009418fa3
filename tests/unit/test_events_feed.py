"""Change feed core: message decoding, the ring, the poller's Thrift calls, the feed's resync rules."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json

import pytest
from thrift.protocol import TBinaryProtocol
from thrift.transport import TTransport

from gateway.events.feed import ChangeFeed, FeedUnavailable, Resync
from gateway.upstream.notification_messages import MessageFormatError, decode_message, gzip_json_message
from gateway.upstream.notification_event import MetastoreEvent
from gateway.upstream.notification_poller import MAX_BATCH, NotificationPoller
from gateway.events.ring import EventRing
from gateway.upstream.errors import UpstreamUnavailable


def ev(i: int, t: int = 1000) -> MetastoreEvent:
    return MetastoreEvent(i, t, "CREATE_DATABASE", f"db{i}", None, {"db": f"db{i}"}, "json-0.2")


# --- messages ---------------------------------------------------------------------------------

def test_json_0_2_is_parsed():
    assert decode_message('{"db":"d","timestamp":1}', "json-0.2") == {"db": "d", "timestamp": 1}


def test_hive4_gzip_json_2_0_is_inflated():
    encoded = base64.b64encode(gzip.compress(b'{"db":"d","tableObjJson":"{}"}')).decode()
    assert decode_message(encoded, "gzip(json-2.0)") == {"db": "d", "tableObjJson": "{}"}
    assert decode_message(gzip_json_message({"a": [1]}), "gzip(json-2.0)") == {"a": [1]}


@pytest.mark.parametrize("message, fmt", [
    ("not json", "json-0.2"), ("[1,2]", "json-0.2"), ("!!!", "gzip(json-2.0)"),
    (base64.b64encode(b"plain, not gzip").decode(), "gzip(json-2.0)"),
    (base64.b64encode(gzip.compress(b"\xff\xfe", mtime=0)).decode(), "gzip(json-2.0)"),
])
def test_undecodable_messages_raise(message, fmt):
    with pytest.raises(MessageFormatError):
        decode_message(message, fmt)


def test_gzip_bomb_is_refused(monkeypatch):
    from gateway.upstream import notification_messages as messages
    monkeypatch.setattr(messages, "MAX_MESSAGE_BYTES", 1000)
    bomb = base64.b64encode(gzip.compress(b"{" + b" " * 5000 + b"}")).decode()
    with pytest.raises(MessageFormatError, match="inflates"):
        decode_message(bomb, "gzip(json-2.0)")


# --- ring -------------------------------------------------------------------------------------

def test_ring_keeps_the_newest_and_raises_its_floor():
    ring = EventRing(3)
    ring.extend([ev(i) for i in range(1, 8)])
    assert [e.event_id for e in ring.after(0, 10)] == [5, 6, 7]
    assert ring.floor == 4 and ring.newest_id == 7 and len(ring) == 3
    assert [e.event_id for e in ring.after(5, 1)] == [6]
    assert ring.after(7, 10) == []


def test_ring_memory_is_bounded_over_many_appends():
    ring = EventRing(10)
    for i in range(1, 1001):
        ring.extend([ev(i)])
    assert len(ring._ids) <= 20 and [e.event_id for e in ring.after(995, 10)] == [996, 997, 998, 999, 1000]


def test_ring_refuses_ids_that_do_not_increase():
    ring = EventRing(3)
    ring.extend([ev(5)])
    with pytest.raises(ValueError):
        ring.extend([ev(5)])


# --- poller against Apache-encoded replies ----------------------------------------------------

class ApacheHMS:
    """A fake upstream that answers the two notification calls as HMS would, with Apache's
    generated code writing the strict-binary replies; ``log`` is the notification log."""

    def __init__(self, ttypes, service, log: list):
        self.ttypes, self.service, self.log = ttypes, service, log
        self.calls: list[str] = []
        self.fail = False

    async def call(self, request: bytes, *, identity=None, read_only=False, **_):
        if self.fail:
            raise UpstreamUnavailable("down")
        proto_in = TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(request))
        name, _, seqid = proto_in.readMessageBegin()
        self.calls.append(name)
        out = TTransport.TMemoryBuffer()
        proto = TBinaryProtocol.TBinaryProtocol(out)
        if name == "get_current_notificationEventId":
            result = self.service.get_current_notificationEventId_result(
                success=self.ttypes.CurrentNotificationEventId(max([e.eventId for e in self.log], default=0)))
        else:
            args = self.service.get_next_notification_args()
            args.read(proto_in)
            rq = args.rqst
            events = [e for e in self.log if e.eventId > rq.lastEvent][: rq.maxEvents]
            result = self.service.get_next_notification_result(
                success=self.ttypes.NotificationEventResponse(events))
        proto.writeMessageBegin(name, 2, seqid)
        result.write(proto)
        proto.writeMessageEnd()
        return out.getvalue()


@pytest.fixture
def hms_log(apache_hms):
    log: list = []
    return log, ApacheHMS(apache_hms.ttypes, apache_hms.service, log)


def notification(ttypes, i, fmt="json-0.2", message=None, t=1000):
    return ttypes.NotificationEvent(
        eventId=i, eventTime=t, eventType="ADD_PARTITION", dbName="d", tableName="t",
        message=message if message is not None else json.dumps({"db": "d", "partitions": [{"p": str(i)}]}),
        messageFormat=fmt)


async def test_poller_reads_and_decodes_both_formats(apache_hms, schema, hms_log):
    log, fake = hms_log
    log += [notification(apache_hms.ttypes, 1),
            notification(apache_hms.ttypes, 2, "gzip(json-2.0)", gzip_json_message({"db": "d", "x": 2})),
            notification(apache_hms.ttypes, 3, "json-0.2", "garbage")]
    poller = NotificationPoller(fake, schema)
    assert await poller.current_id() == 3
    events = await poller.next_events(0, 10)
    assert [(e.event_id, e.event_type, e.db, e.table) for e in events] == [
        (1, "ADD_PARTITION", "d", "t"), (2, "ADD_PARTITION", "d", "t"), (3, "ADD_PARTITION", "d", "t")]
    assert events[0].message == {"db": "d", "partitions": [{"p": "1"}]}
    assert events[1].message == {"db": "d", "x": 2} and events[1].message_format == "gzip(json-2.0)"
    assert events[2].message == {}  # undecodable: empty, never the raw text
    assert [e.event_id for e in await poller.next_events(1, 1)] == [2]


async def test_feed_batches_of_at_most_1000_and_resync_rules(apache_hms, schema, hms_log):
    log, fake = hms_log
    log += [notification(apache_hms.ttypes, i) for i in range(1, 2501)]
    feed = ChangeFeed(NotificationPoller(fake, schema), ring_size=3000)
    with pytest.raises(FeedUnavailable):
        feed.events_after(0, 10)
    await feed.poll_once()
    assert fake.calls == ["get_current_notificationEventId"] + ["get_next_notification"] * 3
    assert feed.latest_id == 2500 and feed.ring.floor == 0
    assert [e.event_id for e in feed.events_after(2497, 10)] == [2498, 2499, 2500]
    assert len(feed.events_after(0, MAX_BATCH)) == MAX_BATCH
    with pytest.raises(Resync) as info:
        feed.events_after(2600, 10)
    assert info.value.reason == "reset" and info.value.latest_id == 2500

    # HMS's time-to-live trims 1..2600 while new events arrive: a gap the feed cannot bridge.
    log[:] = [notification(apache_hms.ttypes, i) for i in range(2601, 2611)]
    await feed.poll_once()
    assert feed.ring.floor == 2600 and feed.latest_id == 2610
    with pytest.raises(Resync) as info:
        feed.events_after(2500, 10)
    assert info.value.reason == "trimmed"
    assert [e.event_id for e in feed.events_after(2600, 2)] == [2601, 2602]


async def test_repeated_event_ids_keep_the_feed_alive(apache_hms, schema, hms_log, caplog):
    # HMS 2.3 may give two events committed on concurrent connections the same id (HIVE-16886).
    log, fake = hms_log
    log += [notification(apache_hms.ttypes, i) for i in (1, 2, 3, 3, 4)]
    feed = ChangeFeed(NotificationPoller(fake, schema), ring_size=100)
    await feed.poll_once()
    assert [e.event_id for e in feed.events_after(0, 10)] == [1, 2, 3, 4]
    assert "repeated event id 3" in caplog.text


async def test_a_failing_poll_does_not_end_the_feed(apache_hms, schema, hms_log, monkeypatch):
    log, fake = hms_log
    log += [notification(apache_hms.ttypes, 1)]
    feed = ChangeFeed(NotificationPoller(fake, schema), ring_size=100, poll_interval=0.01)
    real, failures = feed.poll_once, []

    async def flaky():
        if len(failures) < 2:
            failures.append(1)
            raise ValueError("unexpected")
        await real()
    monkeypatch.setattr(feed, "poll_once", flaky)
    await feed.start()
    try:
        assert [e.event_id for e in await feed.wait_after(0, 5)] == [1]
    finally:
        await feed.close()
    assert len(failures) == 2


async def test_feed_backfills_at_most_its_ring_and_follows_an_hms_reset(apache_hms, schema, hms_log):
    log, fake = hms_log
    log += [notification(apache_hms.ttypes, i) for i in range(1, 51)]
    feed = ChangeFeed(NotificationPoller(fake, schema), ring_size=20)
    await feed.poll_once()
    assert feed.ring.floor == 30 and [e.event_id for e in feed.events_after(45, 10)] == [46, 47, 48, 49, 50]
    with pytest.raises(Resync):
        feed.events_after(10, 10)
    log[:] = [notification(apache_hms.ttypes, i) for i in range(1, 4)]  # a new, empty HMS
    await feed.poll_once()
    assert feed.latest_id == 3 and [e.event_id for e in feed.events_after(0, 10)] == [1, 2, 3]
    with pytest.raises(Resync) as info:
        feed.events_after(50, 10)
    assert info.value.reason == "reset"


async def test_many_waiters_share_one_poll_per_interval(apache_hms, schema, hms_log):
    log, fake = hms_log
    feed = ChangeFeed(NotificationPoller(fake, schema), poll_interval=0.05)
    await feed.start()
    try:
        waiters = [asyncio.create_task(feed.wait_after(0, timeout=30)) for _ in range(1000)]
        await asyncio.sleep(0.2)
        assert not any(w.done() for w in waiters)
        polls_before = feed.polls
        log.append(notification(apache_hms.ttypes, 1))
        results = await asyncio.gather(*waiters)
        assert all([e.event_id for e in r] == [1] for r in results)
        # Each poll is one get_current_notificationEventId, whatever the number of waiters.
        assert fake.calls.count("get_current_notificationEventId") == feed.polls
        assert feed.polls - polls_before < 1000
    finally:
        await feed.close()


async def test_wait_after_times_out_empty_and_reports_an_unreachable_hms(apache_hms, schema, hms_log):
    log, fake = hms_log
    feed = ChangeFeed(NotificationPoller(fake, schema), poll_interval=0.05)
    fake.fail = True
    await feed.start()
    try:
        with pytest.raises(FeedUnavailable):
            await feed.wait_after(0, timeout=0.3)
        fake.fail = False
        assert await feed.wait_after(0, timeout=0.3) == []
    finally:
        await feed.close()


def test_subscribed_counts_clients(apache_hms, schema, hms_log):
    feed = ChangeFeed(NotificationPoller(hms_log[1], schema))
    with feed.subscribed(), feed.subscribed():
        assert feed.subscribers == 2
    assert feed.subscribers == 0


async def test_a_position_another_replica_handed_out_is_reached_not_called_a_reset(apache_hms, schema, hms_log):
    """Issue 26: a client resuming on a replica that has not polled yet (its SSE Last-Event-ID,
    the broker offset) gets the events, not a 410; only an id ahead of HMS itself is a reset."""
    log, fake = hms_log
    log += [notification(apache_hms.ttypes, i) for i in range(1, 4)]
    feed = ChangeFeed(NotificationPoller(fake, schema))
    await feed.poll_once()
    log += [notification(apache_hms.ttypes, i) for i in range(4, 7)]  # another replica read these
    with pytest.raises(Resync):
        feed.events_after(5, 10)
    await feed.reach(5)
    assert [e.event_id for e in feed.events_after(5, 10)] == [6]
    polls = fake.calls.count("get_current_notificationEventId")
    await feed.reach(5)  # already read: no call
    assert fake.calls.count("get_current_notificationEventId") == polls
    await feed.reach(9)  # ahead of HMS: still a reset
    with pytest.raises(Resync) as info:
        feed.events_after(9, 10)
    assert info.value.reason == "reset" and info.value.latest_id == 6
