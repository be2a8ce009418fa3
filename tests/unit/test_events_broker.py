"""Broker publisher parts that need no broker: settings, the offset file, the STOMP frame."""

from __future__ import annotations

import json
import os

import pytest
from pydantic import ValidationError

from gateway.events.broker import BrokerSettings, broker_frame, read_offset, write_offset
from gateway.events.model import MetastoreEvent


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
