"""HCatalog messages and topics (seed 002) built from HMS's json-0.2 notification messages.

The last tests use messages captured from the real HMS 2.3.10 (``hms23_notification_log.json``).
The hand-written HMS messages have the fields Hive 2.3.10's
``org.apache.hadoop.hive.metastore.messaging.json.JSON*Message`` classes serialize (checked with
``javap`` against pyspark's ``hive-metastore-2.3.10.jar``); ``tableObjJson`` is a Table in
Thrift's TJSONProtocol, as ``JSONMessageFactory.createTableObjJson`` writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.events import hcat
from gateway.upstream.notification_messages import decode_message
from gateway.upstream.notification_event import MetastoreEvent

SERVER = "thrift://hms.example.net:9083"
PRINCIPAL = "hive/hms.example.net@EXAMPLE.NET"


def table_tjson(db: str, table: str, parameters: dict[str, str]) -> str:
    """A Table as TJSON: tableName (1), dbName (2), parameters (9), partitionKeys (8)."""
    return json.dumps(
        {
            "1": {"str": table},
            "2": {"str": db},
            "8": {"lst": ["rec", 1, {"1": {"str": "hair_color"}, "2": {"str": "string"}}]},
            "9": {"map": ["str", "str", len(parameters), parameters]},
        },
        separators=(",", ":"),
    )


def event(event_type: str, message: dict, *, db="Sales", table=None, event_id=41) -> MetastoreEvent:
    return MetastoreEvent(
        event_id=event_id,
        event_time=1_700_000_000,
        event_type=event_type,
        db=db,
        table=table,
        message=message,
        message_format="json-0.2",
    )


def database_message(db="Sales") -> dict:
    # JSONCreateDatabaseMessage / JSONDropDatabaseMessage: server, servicePrincipal, db, timestamp
    return {"server": SERVER, "servicePrincipal": PRINCIPAL, "db": db, "timestamp": 1_700_000_001}


def table_message(db="Sales", table="Orders", parameters=None) -> dict:
    # JSONCreateTableMessage: + table, tableObjJson, files; JSONDropTableMessage has no tableObjJson
    return {
        **database_message(db),
        "table": table,
        "tableObjJson": table_tjson(db.lower(), table.lower(), parameters or {}),
        "files": [],
    }


def partition_message(parameters=None, partitions=None) -> dict:
    # JSONAddPartitionMessage: + partitions (key → value maps), partitionListJson, partitionFiles
    return {
        **table_message(parameters=parameters),
        "partitions": partitions
        if partitions is not None
        else [{"hair_color": "black"}, {"hair_color": "brown"}],
        "partitionListJson": ["{}", "{}"],
        "partitionFiles": [],
    }


@pytest.mark.parametrize("kind", ["CREATE_DATABASE", "DROP_DATABASE"])
def test_database_events_have_the_seed_fields(kind):
    body = hcat.hcat_message(event(kind, database_message()))
    assert body == {
        "eventId": 41,
        "timestamp": 1_700_000_001,
        "eventType": kind,
        "server": SERVER,
        "servicePrincipal": PRINCIPAL,
        "db": "Sales",
    }


@pytest.mark.parametrize("kind", ["CREATE_TABLE", "DROP_TABLE"])
def test_table_events_add_the_table_and_drop_hms_extras(kind):
    body = hcat.hcat_message(event(kind, table_message(), table="Orders"))
    assert body["eventType"] == kind
    assert body["table"] == "Orders"
    assert set(body) == {"eventId", "timestamp", "eventType", "server", "servicePrincipal", "db", "table"}


@pytest.mark.parametrize("kind", ["ADD_PARTITION", "DROP_PARTITION"])
def test_partition_events_carry_key_value_maps(kind):
    message = partition_message(partitions=[{"year": "2024", "month": 1}, "not a map"])
    body = hcat.hcat_message(event(kind, message, table="Orders"))
    assert body["partitions"] == [{"year": "2024", "month": "1"}]
    assert "partitionListJson" not in body and "tableObjJson" not in body


def test_missing_fields_fall_back_to_the_notification_event():
    body = hcat.hcat_message(event("ADD_PARTITION", {}, db="db1", table="t1", event_id=7))
    assert body == {
        "eventId": 7,
        "timestamp": 1_700_000_000,
        "eventType": "ADD_PARTITION",
        "server": "",
        "servicePrincipal": "",
        "db": "db1",
        "table": "t1",
        "partitions": [],
    }


def test_other_types_are_not_hcatalog_messages():
    assert not hcat.is_hcat_type("ALTER_TABLE")
    assert all(hcat.is_hcat_type(kind) for kind in hcat.HCAT_TYPES)
    assert len(hcat.HCAT_TYPES) == 6
    with pytest.raises(ValueError, match="ALTER_TABLE"):
        hcat.hcat_message(event("ALTER_TABLE", table_message(), table="Orders"))


def test_topics_follow_the_seed_scheme():
    assert hcat.topics(event("CREATE_DATABASE", database_message())) == ["hcat"]
    assert hcat.topics(event("DROP_TABLE", table_message(), table="Orders")) == ["hcat.sales"]
    assert hcat.topics(event("ALTER_TABLE", table_message(), table="Orders")) == ["hcat.sales"]
    assert hcat.topics(event("ADD_PARTITION", partition_message(), table="Orders")) == [
        "hcat.sales.orders"
    ]
    assert hcat.topics(event("CREATE_FUNCTION", {"db": "Sales"}), prefix="corp.hcat") == ["corp.hcat"]
    assert hcat.topics(
        event("DROP_PARTITION", partition_message(), table="Orders"), prefix="corp"
    ) == ["corp.sales.orders"]


def test_table_topic_property_overrides_partition_topics():
    named = {hcat.TOPIC_NAME_PROPERTY: "example_table_topic_name"}
    # Read from the table embedded in HMS's message (TJSON) …
    assert hcat.topics(event("ADD_PARTITION", partition_message(named), table="Orders")) == [
        "example_table_topic_name"
    ]
    # … or from a decoded table, or from parameters the caller looked up.
    decoded = {**partition_message(), "tableObjJson": {"parameters": named}}
    assert hcat.topics(event("DROP_PARTITION", decoded, table="Orders")) == ["example_table_topic_name"]
    assert hcat.topics(
        event("ADD_PARTITION", partition_message(), table="Orders"), table_params=named
    ) == ["example_table_topic_name"]
    # The property does not move table-level events, and an empty one is ignored, as HCatalog.
    assert hcat.topics(event("CREATE_TABLE", table_message(parameters=named), table="Orders")) == [
        "hcat.sales"
    ]
    empty = {hcat.TOPIC_NAME_PROPERTY: ""}
    assert hcat.topics(event("ADD_PARTITION", partition_message(empty), table="Orders")) == [
        "hcat.sales.orders"
    ]


@pytest.mark.parametrize("table_obj", ["{not json", "[1]", 3, {"9": {"map": ["str"]}}])
def test_unreadable_embedded_tables_fall_back_to_the_default_topic(table_obj):
    message = {**partition_message(), "tableObjJson": table_obj}
    assert hcat.topics(event("ADD_PARTITION", message, table="Orders")) == ["hcat.sales.orders"]


def test_event_body_is_the_hcatalog_message_or_hms_envelope():
    created = event("CREATE_DATABASE", database_message())
    assert hcat.event_body(created) == hcat.hcat_message(created)
    altered = event("ALTER_TABLE", table_message(), table="Orders")
    assert hcat.event_body(altered) == {
        "eventId": 41, "eventTime": 1_700_000_000, "eventType": "ALTER_TABLE", "db": "Sales",
        "table": "Orders", "messageFormat": "json-0.2", "message": table_message(),
    }
    assert hcat.event_body(altered, {"db": "Sales"})["message"] == {"db": "Sales"}


# --- Messages captured from the real HMS 2.3.10 (pyspark's jars) with the project's listener:
# create database sales, tables orders and named (hcat.msgbus.topic.name set), add partitions,
# drop one, alter orders, drop both tables, drop the database (get_next_notification's events).
CAPTURED = Path(__file__).with_name("hms23_notification_log.json")


def captured_events() -> list[MetastoreEvent]:
    return [
        MetastoreEvent(e["eventId"], e["eventTime"], e["eventType"], e["dbName"], e["tableName"],
                       decode_message(e["message"], e["messageFormat"]), e["messageFormat"])
        for e in json.loads(CAPTURED.read_text())
    ]


def test_captured_hms_messages_become_the_seed_messages():
    events = {e.event_id: e for e in captured_events()}
    bodies = {i: hcat.hcat_message(e) for i, e in events.items() if hcat.is_hcat_type(e.event_type)}
    assert sorted(bodies) == [1, 2, 3, 4, 5, 6, 8, 9, 10]  # 7 is ALTER_TABLE
    seed_fields = {"eventId", "timestamp", "eventType", "server", "servicePrincipal", "db"}
    for i, body in bodies.items():
        assert body["eventId"] == i and body["eventType"] == events[i].event_type
        assert abs(body["timestamp"] - events[i].event_time) <= 1  # HMS's seconds, both
        assert set(body) == seed_fields | ({"table"} if events[i].table else set()) | (
            {"partitions"} if "PARTITION" in events[i].event_type else set())
    assert bodies[1] == {"eventId": 1, "timestamp": bodies[1]["timestamp"], "eventType": "CREATE_DATABASE",
                         "server": "", "servicePrincipal": "", "db": "sales"}
    assert bodies[4]["partitions"] == [{"hair_color": "black"}, {"hair_color": "brown"}]
    assert bodies[5]["partitions"] == [{"hair_color": "red"}]
    assert bodies[6]["partitions"] == [{"hair_color": "black"}]


def test_captured_hms_messages_get_the_seed_topics():
    topics = [hcat.topics(e)[0] for e in captured_events()]
    assert topics == [
        "hcat", "hcat.sales", "hcat.sales",
        "hcat.sales.orders", "example_table_topic_name",  # named's property, from tableObjJson
        "hcat.sales.orders", "hcat.sales", "hcat.sales", "hcat.sales", "hcat",
    ]
