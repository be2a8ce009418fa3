"""The audit log: request ids, outcomes, database/table extraction, JSON lines, no secrets."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.config import ConfigError, load_gateway_config
from gateway.observability.settings import AuditConfig
from gateway.observability.audit import (
    AuditEvent,
    AuditLog,
    audit_outcome,
    audit_event,
    request_id,
)
from gateway.thrift.schema import TType
from gateway.thrift.walk import call_objects
from gateway.thrift.translate import encode_binary_call, tjson_call_to_binary


@pytest.mark.parametrize("given, kept", [
    ("abc-123_X.y:z", True),
    ("x" * 128, True),
    ("x" * 129, False),
    ("has space", False),
    ("", False),
    ("a\"b", False),
])
def test_request_id_from_client_only_when_sane(given, kept):
    req = make_mocked_request("POST", "/", headers={"X-Request-Id": given} if given else {})
    rid = request_id(req)
    if kept:
        assert rid == given
    else:
        assert str(uuid.UUID(rid)) == rid and rid != given


def test_audit_event_names_the_request_and_its_client():
    req = make_mocked_request("POST", "/", headers={"X-Request-Id": "abc-1"})
    event = audit_event(req)
    assert event.request_id == "abc-1" and event.client is not None


@pytest.mark.parametrize("detail, outcome", [
    ("ok", "allowed"), ("exception", "allowed"), ("forbidden", "denied"),
    ("unauthenticated", "denied"), ("not_exposed", "denied"), ("throttled", "denied"),
    ("bad_request", "failed"), ("upstream_timeout", "failed"), ("not_found", "failed"),
])
def test_outcomes(detail, outcome):
    assert audit_outcome(detail) == outcome


def call(method: str, *strings: str) -> bytes:
    return encode_binary_call(method, 1, [(i + 1, TType.STRING, s) for i, s in enumerate(strings)])


def test_call_objects_from_arguments(schema):
    assert call_objects(call("get_table", "db1", "t1"), schema) == ("db1", "t1")
    assert call_objects(call("get_database", "db1"), schema) == ("db1", None)
    assert call_objects(call("drop_database", "db1"), schema) == ("db1", None)
    assert call_objects(call("get_all_databases"), schema) == (None, None)
    assert call_objects(call("get_databases", "pattern*"), schema) == (None, None)  # a pattern
    assert call_objects(call("no_such_method", "x"), schema) == (None, None)
    _, create_table = tjson_call_to_binary(
        b'[1,"create_table",1,1,{"1":{"rec":{"1":{"str":"t9"},"2":{"str":"d9"},'
        b'"9":{"map":["str","str",1,{"k":"v"}]}}}}]', schema)
    assert call_objects(create_table, schema) == ("d9", "t9")
    _, create_db = tjson_call_to_binary(
        b'[1,"create_database",1,1,{"1":{"rec":{"1":{"str":"newdb"}}}}]', schema)
    assert call_objects(create_db, schema) == ("newdb", None)


def test_call_objects_remembered_by_bytes_but_the_seqid(schema):
    from gateway.thrift import walk

    first = encode_binary_call("get_table", 1, [(1, TType.STRING, "db1"), (2, TType.STRING, "t1")])
    again = encode_binary_call("get_table", 99, [(1, TType.STRING, "db1"), (2, TType.STRING, "t1")])
    other = encode_binary_call("get_table", 99, [(1, TType.STRING, "db1"), (2, TType.STRING, "t2")])
    memo = walk._remembered(schema)
    memo.cache_clear()
    assert call_objects(first, schema) == ("db1", "t1")
    assert call_objects(again, schema) == ("db1", "t1")
    assert memo.cache_info().hits == 1  # another seqid: the same entry
    assert call_objects(other, schema) == ("db1", "t2")  # other arguments: another entry
    big = encode_binary_call("get_table", 1, [(1, TType.STRING, "d" * 2000), (2, TType.STRING, "t1")])
    assert call_objects(big, schema) == ("d" * 256, "t1")  # over 1 KiB: walked, not remembered
    assert memo.cache_info().currsize == 2
    for message in (first, other, big, b"", b"\x80\x01\x00\x01\xff\xff\xff\xff"):
        assert call_objects(message, schema) == walk._call_objects(message, schema, 256)


def test_call_objects_never_raises_on_bad_bytes(schema):
    good = call("get_table", "db1", "t1")
    for cut in range(len(good)):
        call_objects(good[:cut], schema)  # truncated: no exception
    assert call_objects(b"\x00garbage", schema) == (None, None)


def test_long_names_are_clipped(schema):
    db, _ = call_objects(call("get_database", "d" * 5000), schema)
    assert db == "d" * 256


def test_audit_log_writes_one_json_object_per_line(tmp_path):
    path = tmp_path / "logs" / "audit.jsonl"
    log = AuditLog(AuditConfig(path=path))
    event = AuditEvent("rid-1", "10.0.0.1", topology="t", service="s", user="alice",
                       effective_user="bob", impersonator="alice", method="get_table",
                       database="d\nx", table="t")
    log.write(event, "ok", 200)
    log.write(AuditEvent("rid-2", None, reason="user zed is not in the service ACL"), "forbidden", 403)
    log.close()
    log.write(AuditEvent("after-close", None), "ok", 200)  # ignored, never raises
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first, second = map(json.loads, lines)
    assert first["request_id"] == "rid-1" and first["database"] == "d\nx"  # escaped, one line
    assert (first["outcome"], first["status"], first["effective_user"]) == ("allowed", 200, "bob")
    assert set(first) == {"time", "request_id", "topology", "service", "client", "user",
                          "effective_user", "impersonator", "method", "database", "table",
                          "outcome", "detail", "status", "duration_ms", "reason"}
    assert (second["outcome"], second["reason"]) == ("denied", "user zed is not in the service ACL")


async def test_audit_lines_are_written_in_batches_inside_the_event_loop(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(AuditConfig(path=path), flush_seconds=0.2)
    for i in range(3):
        log.write(AuditEvent(f"r{i}", None), "ok", 200)
    await asyncio.sleep(0.05)
    assert path.read_text() == ""  # still buffered: no thread hand-off per line
    for _ in range(100):
        await asyncio.sleep(0.05)
        if path.read_text():
            break
    assert [json.loads(x)["request_id"] for x in path.read_text().splitlines()] == ["r0", "r1", "r2"]
    log.write(AuditEvent("r3", None), "ok", 200)
    log.close()  # writes what is buffered at once
    assert path.read_text().splitlines()[-1].startswith('{"time"')
    assert json.loads(path.read_text().splitlines()[-1])["request_id"] == "r3"


async def test_a_full_audit_buffer_is_written_without_waiting(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(AuditConfig(path=path), flush_seconds=3600, flush_bytes=1000)
    for i in range(10):  # ~330 bytes a line: the buffer is full every third or fourth line
        log.write(AuditEvent(f"r{i}", None, reason="x" * 100), "ok", 200)
    for _ in range(100):
        if path.read_text():
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)
    assert 0 < len(path.read_text().splitlines()) < 10  # whole batches out, the rest buffered
    log.close()
    assert len(path.read_text().splitlines()) == 10


def test_disabled_audit_log_writes_nothing(tmp_path):
    log = AuditLog(AuditConfig(enabled=False, path=tmp_path / "a.jsonl"))
    log.write(AuditEvent("r", None), "ok", 200)
    log.close()
    assert not (tmp_path / "a.jsonl").exists()


def test_audit_path_resolves_against_the_gateway_file(tmp_path):
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("tls: {certificate: c.pem, private_key: k.pem}\naudit: {path: logs/audit.jsonl}\n")
    assert load_gateway_config(cfg).audit.path == tmp_path / "logs" / "audit.jsonl"
    cfg.write_text("tls: {certificate: c.pem, private_key: k.pem}\naudit: {file: x}\n")
    with pytest.raises(ConfigError) as err:
        load_gateway_config(cfg)
    assert err.value.key == "audit.file"


def test_a_malformed_http_request_is_logged_without_its_bytes(capsys):
    """aiohttp's parser error quotes the bad header line; the gateway's log keeps only its class."""
    import logging

    from aiohttp.http_exceptions import BadHttpMessage

    from gateway.observability.log_format import configure_logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging("json", "INFO")
    try:
        raise BadHttpMessage("Invalid header value char: b'Authorization: Basic c2VjcmV0\\x01'")
    except BadHttpMessage:
        logging.getLogger("aiohttp.server").exception("Error handling request from 127.0.0.1")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    assert "BadHttpMessage" in err and '"level": "INFO"' in err
    assert "c2VjcmV0" not in err and "Authorization" not in err
