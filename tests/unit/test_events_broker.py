"""Broker publisher parts that need no broker: settings, the offset file, the STOMP frame, and
the publishing loop (resume, retry, trimmed log, HMS reset) over a ChangeFeed with a scripted log."""

from __future__ import annotations

import asyncio
import json
import os
import threading

import pytest
from pydantic import ValidationError

from gateway.events.broker import (
    BrokerError, BrokerPublisher, BrokerSettings, broker_frame, read_offset, write_offset,
)
from gateway.events.feed import ChangeFeed
from gateway.upstream.notification_event import MetastoreEvent


def event(event_type, message, *, db="sales", table="orders", fmt="json-0.2", event_id=12):
    return MetastoreEvent(event_id, 1_700_000_000, event_type, db, table, message, fmt)


def test_offset_round_trip_and_atomic_replace(tmp_path):
    path = tmp_path / "state" / "broker.offset"
    assert read_offset(path) is None
    write_offset(path, 41)
    write_offset(path, 42)
    assert read_offset(path) == 42
    assert sorted(os.listdir(path.parent)) == ["broker.offset"]  # no temporary file left


@pytest.mark.parametrize("content", [b"", b"-3\n", b"12abc", b"\xff\xfe"])
def test_corrupt_offset_is_an_error_naming_the_file(tmp_path, content):
    path = tmp_path / "broker.offset"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="broker.offset"):
        read_offset(path)


def test_settings_resolve_paths_against_the_topology_folder(tmp_path):
    (tmp_path / "stomp.pass").write_text("s3cret\nignored\n")
    settings = BrokerSettings.model_validate(
        {"url": "stomp+ssl://mq.example.net:61614", "login": "gateway",
         "passcode_file": "stomp.pass", "offset_file": "var/broker.offset"},
        context={"base_dir": tmp_path},
    )
    assert settings.address == ("mq.example.net", 61614, True)
    assert settings.offset_file == tmp_path / "var" / "broker.offset"
    assert settings.passcode() == "s3cret"
    assert "s3cret" not in repr(settings)
    assert settings.topic_prefix == "hcat"


@pytest.mark.parametrize(
    "options, field",
    [
        ({"url": "amqp://mq:5672"}, "url"),
        ({"url": "stomp://mq"}, "url"),
        ({"url": "stomp://mq:notaport"}, "url"),
        ({"url": "stomp://mq:61613", "passcode_file": "/nonexistent/pass"}, "passcode_file"),
        ({"url": "stomp://mq:61613", "batch_size": 0}, "batch_size"),
        ({"url": "stomp://mq:61613", "queue": "x"}, "queue"),
        ({"url": "stomp://mq:61613", "topic_prefix": ""}, "topic_prefix"),
    ],
)
def test_bad_settings_name_the_field(options, field):
    with pytest.raises(ValidationError) as raised:
        BrokerSettings.model_validate({"offset_file": "/tmp/offset", **options})
    assert field in {str(error["loc"][0]) for error in raised.value.errors()}


def test_hcatalog_event_frame():
    message = {"server": "thrift://hms:9083", "servicePrincipal": "", "db": "sales", "table": "orders",
               "timestamp": 1_700_000_005, "partitions": [{"dt": "2024-01-01"}],
               "tableObjJson": "{}", "partitionListJson": ["{}"]}
    destination, headers, body = broker_frame(event("ADD_PARTITION", message), prefix="corp")
    assert destination == "/topic/corp.sales.orders"
    assert headers["HCAT_EVENT"] == "ADD_PARTITION"
    assert headers["HCAT_MESSAGE_VERSION"] == "0.1"
    assert headers["HCAT_MESSAGE_FORMAT"] == headers["HCAT_FORMAT"] == "json"
    assert headers["persistent"] == "true"
    assert "content-length" not in headers  # ActiveMQ makes a TextMessage only without it
    assert json.loads(body) == {"eventId": 12, "timestamp": 1_700_000_005, "eventType": "ADD_PARTITION",
                                "server": "thrift://hms:9083", "servicePrincipal": "", "db": "sales",
                                "table": "orders", "partitions": [{"dt": "2024-01-01"}]}


@pytest.mark.parametrize("fmt, version", [("json-0.2", "0.2"), ("gzip(json-2.0)", "2.0"), ("custom", "custom")])
def test_other_events_carry_hms_message_and_its_version(fmt, version):
    message = {"db": "sales", "table": "orders", "tableObjBeforeJson": "{}", "tableObjAfterJson": "{}"}
    destination, headers, body = broker_frame(event("ALTER_TABLE", message, fmt=fmt))
    assert destination == "/topic/hcat.sales"
    assert headers["HCAT_EVENT"] == "ALTER_TABLE"
    assert headers["HCAT_MESSAGE_VERSION"] == version
    assert json.loads(body) == {"eventId": 12, "eventTime": 1_700_000_000, "eventType": "ALTER_TABLE",
                                "db": "sales", "table": "orders", "messageFormat": fmt, "message": message}


def test_body_is_text_without_nul():
    _, _, body = broker_frame(event("CREATE_DATABASE", {"db": "a\x00b"}, table=None))
    assert "\x00" not in body
    assert json.loads(body)["db"] == "a\x00b"


# --- the publisher's loop, over a real ChangeFeed fed by a scripted notification log ---------

class ScriptedLog:
    """The two poller calls the feed makes, answered from ``events`` (HMS's log)."""

    def __init__(self, ids):
        self.events = [event("CREATE_DATABASE", {"db": f"db{i}"}, table=None, event_id=i) for i in ids]

    async def current_id(self) -> int:
        return self.events[-1].event_id if self.events else 0

    async def next_events(self, after: int, limit: int):
        return [e for e in self.events if e.event_id > after][:limit]


class RecordingPublisher(BrokerPublisher):
    """The publisher with the broker replaced by a list; the first ``failures`` sends fail."""

    def __init__(self, feed, settings, failures: int = 0):
        super().__init__(feed, settings, wait_seconds=0.05)
        self.sent: list[list[int]] = []
        self.failures = failures

    def _send(self, batch):
        if self.failures:
            self.failures -= 1
            raise BrokerError("no receipt within 10 s")
        self.sent.append([e.event_id for e in batch])


async def published(publisher, last_id: int):
    for _ in range(2000):  # bounded against hanging; not a timing assertion
        if publisher.published_id == last_id:
            return [i for batch in publisher.sent for i in batch]
        await asyncio.sleep(0.005)
    raise AssertionError(f"published up to {publisher.published_id}, not {last_id}: {publisher.sent}")


def settings_in(tmp_path, **extra):
    return BrokerSettings(url="stomp://127.0.0.1:1", offset_file=tmp_path / "broker.offset",
                          retry_seconds=0.01, **extra)


async def test_first_start_follows_from_the_newest_id_in_batches(tmp_path):
    hms = ScriptedLog(range(1, 4))
    feed = ChangeFeed(hms, ring_size=100)
    publisher = RecordingPublisher(feed, settings_in(tmp_path, batch_size=2))
    await publisher.start()
    try:
        await feed.poll_once()
        assert await published(publisher, 3) == []  # what happened before is not replayed
        hms.events += ScriptedLog(range(4, 9)).events
        await feed.poll_once()
        assert await published(publisher, 8) == [4, 5, 6, 7, 8]
        assert publisher.sent == [[4, 5], [6, 7], [8]]
        assert read_offset(tmp_path / "broker.offset") == 8
    finally:
        await publisher.close()


async def test_a_failed_send_is_retried_and_the_offset_waits_for_it(tmp_path):
    write_offset(tmp_path / "broker.offset", 2)
    feed = ChangeFeed(ScriptedLog(range(1, 6)), ring_size=100)
    publisher = RecordingPublisher(feed, settings_in(tmp_path), failures=3)
    await feed.poll_once()
    await publisher.start()
    try:
        assert await published(publisher, 5) == [3, 4, 5]  # resumed after the stored id
        assert publisher.failures == 0
    finally:
        await publisher.close()


async def test_a_stop_while_the_broker_takes_a_batch_stores_its_offset(tmp_path):
    """close() (SIGTERM, a reload) while a batch is being sent: the batch is finished and its
    offset stored, so the next publisher (a rolling update's next leader) does not send it
    again (issue 33)."""
    write_offset(tmp_path / "broker.offset", 2)
    feed = ChangeFeed(ScriptedLog(range(1, 6)), ring_size=100)
    sending, go_on = threading.Event(), threading.Event()

    class Held(RecordingPublisher):
        def _send(self, batch):
            sending.set()
            go_on.wait(30)
            super()._send(batch)

    publisher = Held(feed, settings_in(tmp_path))
    await feed.poll_once()
    await publisher.start()
    assert await asyncio.to_thread(sending.wait, 30)
    closing = asyncio.create_task(publisher.close())
    await asyncio.sleep(0)  # close() has cancelled the publisher while the broker holds the batch
    go_on.set()
    await closing
    assert publisher.sent == [[3, 4, 5]]
    assert read_offset(tmp_path / "broker.offset") == 5


async def test_trimmed_events_are_logged_as_lost_and_the_rest_published(tmp_path, caplog):
    write_offset(tmp_path / "broker.offset", 5)
    feed = ChangeFeed(ScriptedLog(range(1, 51)), ring_size=20)  # keeps 31..50
    publisher = RecordingPublisher(feed, settings_in(tmp_path))
    await feed.poll_once()
    await publisher.start()
    try:
        assert await published(publisher, 50) == list(range(31, 51))
    finally:
        await publisher.close()
    assert "events 6 to 30 are lost" in caplog.text


async def test_after_an_hms_reset_the_new_log_is_published_from_its_start(tmp_path, caplog):
    write_offset(tmp_path / "broker.offset", 50)
    feed = ChangeFeed(ScriptedLog(range(1, 4)), ring_size=20)
    publisher = RecordingPublisher(feed, settings_in(tmp_path))
    await feed.poll_once()
    await publisher.start()
    try:
        assert await published(publisher, 3) == [1, 2, 3]
    finally:
        await publisher.close()
    assert "HMS was reset" in caplog.text


async def test_a_corrupt_offset_file_stops_the_start(tmp_path):
    (tmp_path / "broker.offset").write_text("forty-two")
    publisher = RecordingPublisher(ChangeFeed(ScriptedLog([])), settings_in(tmp_path))
    with pytest.raises(ValueError, match="broker.offset"):
        await publisher.start()
