"""The change feed published to a real ActiveMQ over STOMP (issue 12 item 9, seed 002).

A real HMS 2.3 writes its notification log through the project's listener; the real gateway runs
an ``event-stream`` service with ``options.broker``; Debian's ActiveMQ receives. Consumers: a
STOMP durable subscriber (stomp.py) and, as the seed shows one, a JMS subscriber built from
Debian's ActiveMQ client jars. Checked: topic names (prefix, prefix.db, the table's
``hcat.msgbus.topic.name``), the HCAT_* properties, TextMessages, bodies; and that a gateway
restart and a broker restart lose nothing (duplicates are allowed: delivery is at least once).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gateway.events.broker import read_offset
# The feed_hms and catalog fixtures (an HMS of its own per module) are in tests/integration/conftest.py.
from tests.support.feed import publisher_leading, start_feed_gateway
from tests.support.gateway import GatewayFactory, wait_for
from tests.support.activemq import Subscriber, jms_messages, start_activemq, start_jms_consumer

pytestmark = pytest.mark.integration

NAMED_TOPIC = "example_table_topic_name"  # the seed's own example of the table property


@pytest.fixture
def activemq(tmp_path):
    broker = start_activemq(tmp_path / "activemq")
    yield broker
    broker.stop()


def start_publishing_gateway(start: GatewayFactory, workdir: Path, hms, broker) -> tuple:
    """A gateway started by ``start`` in ``workdir``, publishing to ``broker``; returns once its
    publisher has written its first offset (so every change from now on is published), with the
    offset file's path."""
    offset = workdir / "state" / "broker.offset"
    gw = start_feed_gateway(start, hms, workdir=workdir,
                            broker={"url": broker.stomp_url, "offset_file": str(offset)})
    deadline = time.monotonic() + 60
    while read_offset(offset) is None:
        assert time.monotonic() < deadline, f"no offset written:\n{gw.log()}"
        time.sleep(0.1)
    return gw, offset


def test_ddl_reaches_hcatalog_topics_as_text_messages_with_hcat_properties(feed_hms, catalog, activemq, tmp_path,
                                                                            gateway_factory):
    stomp_sub = Subscriber(activemq.stomp_port, "ddl")
    jms = start_jms_consumer(activemq, "hcat.mq_db", 5)  # the database's table events, per the seed
    gw, offset = start_publishing_gateway(gateway_factory, tmp_path / "gateway", feed_hms, activemq)
    try:
        catalog.create_database("mq_db")
        catalog.create_table("mq_db", "people")
        catalog.create_table("mq_db", "named", params={"hcat.msgbus.topic.name": NAMED_TOPIC})
        catalog.add_partitions("mq_db", "people", ["black", "brown"])
        catalog.add_partitions("mq_db", "named", ["red"])
        catalog.drop_partition("mq_db", "people", "black")
        catalog.alter_table("mq_db", "people", ["name", "age", "email"])
        catalog.drop_table("mq_db", "named")
        catalog.drop_table("mq_db", "people")
        catalog.drop_database("mq_db")
        last = catalog.current_id()
        messages = stomp_sub.wait_for(10)
    finally:
        stomp_sub.disconnect()
        gw.stop()
    expected = [
        ("/topic/hcat", "CREATE_DATABASE"),
        ("/topic/hcat.mq_db", "CREATE_TABLE"),
        ("/topic/hcat.mq_db", "CREATE_TABLE"),
        ("/topic/hcat.mq_db.people", "ADD_PARTITION"),
        (f"/topic/{NAMED_TOPIC}", "ADD_PARTITION"),
        ("/topic/hcat.mq_db.people", "DROP_PARTITION"),
        ("/topic/hcat.mq_db", "ALTER_TABLE"),
        ("/topic/hcat.mq_db", "DROP_TABLE"),
        ("/topic/hcat.mq_db", "DROP_TABLE"),
        ("/topic/hcat", "DROP_DATABASE"),
    ]
    assert [(destination, headers["HCAT_EVENT"]) for destination, headers, _ in messages] == expected
    ids = [body["eventId"] for _, _, body in messages]
    assert ids == list(range(last - 9, last + 1))
    assert read_offset(offset) == last
    for destination, headers, body in messages:
        assert headers["HCAT_MESSAGE_FORMAT"] == headers["HCAT_FORMAT"] == "json"
        assert headers["persistent"] == "true"
        if headers["HCAT_EVENT"] == "ALTER_TABLE":  # not an HCatalog type: HMS's own message
            assert headers["HCAT_MESSAGE_VERSION"] == "0.2"
            assert body["messageFormat"] == "json-0.2" and body["message"]["table"] == "people"
            continue
        assert headers["HCAT_MESSAGE_VERSION"] == "0.1"
        assert body["eventType"] == headers["HCAT_EVENT"] and body["db"] == "mq_db"
        assert isinstance(body["timestamp"], int) and body["timestamp"] > 1_600_000_000
        assert isinstance(body["server"], str) and isinstance(body["servicePrincipal"], str)
    people = [body for _, headers, body in messages if body.get("table") == "people"]
    assert people[1]["partitions"] == [{"hair_color": "black"}, {"hair_color": "brown"}]
    assert people[2]["partitions"] == [{"hair_color": "black"}]
    assert messages[4][2]["partitions"] == [{"hair_color": "red"}]

    seen = jms_messages(jms)
    assert jms.returncode == 0
    on_db_topic = [m for m in messages if m[0] == "/topic/hcat.mq_db"]
    assert [(m.jms_class, m.destination, m.hcat_event, m.hcat_message_version, m.hcat_message_format)
            for m in seen] == [
        ("ActiveMQTextMessage", "topic://hcat.mq_db", headers["HCAT_EVENT"], headers["HCAT_MESSAGE_VERSION"], "json")
        for _, headers, _ in on_db_topic
    ]
    assert [json.loads(m.text) for m in seen] == [body for _, _, body in on_db_topic]


def test_gateway_and_broker_restarts_lose_nothing(feed_hms, catalog, activemq, tmp_path, gateway_factory):
    subscriber = Subscriber(activemq.stomp_port, "restarts")
    gw, offset = start_publishing_gateway(gateway_factory, tmp_path / "gateway", feed_hms, activemq)
    try:
        catalog.create_database("mq_r1")
        first = catalog.current_id()
        subscriber.wait_for(1)

        gw.stop()  # changes while the gateway is down
        catalog.create_database("mq_r2")
        catalog.create_table("mq_r2", "t")
        assert read_offset(offset) == first
        gw = gateway_factory.restart(gw)
        subscriber.wait_for(3)

        subscriber.disconnect()
        activemq.stop()  # changes while the broker is down: the publisher retries
        catalog.add_partitions("mq_r2", "t", ["x"])
        catalog.drop_table("mq_r2", "t")
        time.sleep(1.0)  # let the publisher meet the missing broker (not an assertion on time)
        activemq.start()
        subscriber.connect()  # the durable subscription kept what was sent meanwhile
        catalog.drop_database("mq_r2")
        catalog.drop_database("mq_r1")
        last = catalog.current_id()
        subscriber.wait_for(last - first + 1)
    finally:
        subscriber.disconnect()
        gw.stop()
    ids = subscriber.ids()
    assert set(ids) == set(range(first, last + 1)), ids  # nothing lost; duplicates may occur
    assert ids[:3] == [first, first + 1, first + 2]
    assert "publishing resumes after" not in gw.log()  # nothing was trimmed or skipped


def test_a_rolling_restart_of_two_replicas_publishes_each_event_once(feed_hms, catalog, activemq, tmp_path,
                                                                      gateway_factory, record_property):
    """Two replicas sharing the publisher's HMS lock (no ``offset_file``), restarted one after the
    other (SIGTERM, then started again), as a rolling update does. This HMS expires locks after
    its default ``hive.txn.timeout`` (300 s), so only requests released by their holders let the
    next replica lead: a stopped standby's ``WAITING`` request left in HMS's queue would block
    every later replica for minutes (issue 33). After each restart, every lock request on the
    publisher's lock belongs to a running replica, a leader publishes, and each event arrives
    once."""
    broker = {"url": activemq.stomp_url, "state_database": "rolling_state", "lock_check_seconds": 0.2,
              "lock_heartbeat_seconds": 1, "lock_lease_seconds": 5}
    subscriber = Subscriber(activemq.stomp_port, "rolling")
    gateways = [start_feed_gateway(gateway_factory, feed_hms, workdir=tmp_path / f"replica{i}", broker=broker)
                for i in range(2)]
    first = catalog.client.get_current_notificationEventId().eventId + 1
    resumed = []

    def publish(name: str) -> None:
        wait_for(lambda: sum(map(publisher_leading, gateways)) == 1, timeout=60, interval=0.05)
        base = catalog.client.get_current_notificationEventId().eventId
        catalog.create_database(name)
        wait_for(lambda: base + 1 in subscriber.ids(), timeout=60, interval=0.05)

    def requests_of_gone_replicas() -> list:
        live = {f"pid={gw.process.pid} " for gw in gateways}
        locks = catalog.client.show_locks(catalog.t.ShowLocksRequest(dbname="rolling_state")).locks or []
        return [lock for lock in locks if not any(pid in (lock.agentInfo or "") for pid in live)]

    try:
        publish("rolling_0")
        for i in range(2):
            gateways[i] = gateway_factory.restart(gateways[i])  # SIGTERM, then the same configuration again
            started = time.monotonic()
            wait_for(lambda: any(map(publisher_leading, gateways)), timeout=60, interval=0.05)
            resumed.append(round(time.monotonic() - started, 2))
            assert requests_of_gone_replicas() == []
            publish(f"rolling_{i + 1}")
    finally:
        subscriber.disconnect()
    ids = [i for i in subscriber.ids() if i >= first]
    assert len(ids) == len(set(ids)), ids  # each event once: one publisher at a time, offsets kept
    record_property("leading_after_restart_seconds", resumed)
    print(f"a replica led again {resumed} s after each restart")
