"""The Iceberg REST service's validation layer (:mod:`gateway.iceberg.bodies`,
:mod:`gateway.iceberg.hms_bounds`) and its one error model (issue 31): every crash cause the
review found is a 400 before anything is called, HMS's Java text never reaches a client, and an
exception no handler expected is a JSON 500 naming the request id."""

from __future__ import annotations

import json
import logging

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.config import Limits
from gateway.iceberg import bodies, errors, hms_bounds
from gateway.iceberg.errors import BadRequest
from gateway.observability.audit import AuditEvent
from gateway.pipeline.exchange import Exchange
from gateway.iceberg.kind import IcebergRestOptions, IcebergRestService
from gateway.thrift.schema import load_schema
from tests.support.iceberg.hostile import World, _defects
from gateway.upstream.metastore import idl_module
from tests.unit.test_iceberg_rest_parts import _Chain, _Upstream

IDL = idl_module(load_schema())
WORLD = World("sec_a", ("a0",), ("av0",), "sec_b", ("bt",), "nope", "file:///w/sec_a.db", ("file:///w/sec_b.db",))
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _create(**extra) -> bytes:
    return json.dumps({"name": "t", "schema": SCHEMA, **extra}).encode("utf-8", "surrogatepass")


def _parse_as_its_route(path: str, body: bytes):
    if path.endswith("/tables"):
        return bodies.parse(bodies.CreateTableRequest, body)
    if path.endswith("/properties"):
        return bodies.parse(bodies.UpdateNamespaceProperties, body)
    if path == "/v1/namespaces":
        return bodies.parse(bodies.CreateNamespace, body)
    return bodies.commit_request(body)


#: The crash causes of issue 31 that are the body's alone (the others: locations, properties
#: that choose code, a staged create's missing pieces are refused further on).
BODY_DEFECTS = {"properties not an object", "namespace properties not an object", "updates not an object",
                "commit updates not a list", "format-version 3", "format-version 99", "bad transform", "fixed[-1]",
                "NUL in a location", "object storage maybe", "lone surrogate", "5000-character location", "x and X",
                "600 KiB property"}


@pytest.mark.parametrize("label, path, body", [
    (label, path, json.dumps(body).encode("utf-8", "surrogatepass"))
    for label, _, path, body in _defects(WORLD) if label in BODY_DEFECTS])
def test_every_body_crash_cause_is_a_400_of_the_validation_layer(label, path, body):
    with pytest.raises(BadRequest) as refused:
        _parse_as_its_route(path, body)
    assert refused.value.status == 400 and refused.value.message


def test_the_defect_list_covers_what_the_unit_tests_name():
    assert BODY_DEFECTS <= {label for label, *_ in _defects(WORLD)}


@pytest.mark.parametrize("text", ["a\u0000b", "\ud800", "x\udfff"])
def test_nul_and_lone_surrogates_are_refused_anywhere_in_a_body(text):
    for body in ({"namespace": ["n"], "properties": {"k": text}}, {"namespace": ["n"], "properties": {text: "v"}},
                 {"deep": [[{"x": [text]}]]}):
        with pytest.raises(BadRequest, match="U\\+0000|surrogate"):
            bodies.document(json.dumps(body).encode())


def test_python_s_own_words_are_not_the_message():
    with pytest.raises(BadRequest) as refused:
        bodies.parse(bodies.CreateTableRequest, _create(properties=["a"]))
    assert "attribute" not in refused.value.message and "wrong type" in refused.value.message


@pytest.mark.parametrize("value", ["1", "2", 1, 2])
def test_supported_format_versions_pass(value):
    hms_bounds.format_version(value)


@pytest.mark.parametrize("value", ["3", "99", "0", "-1", "x", "", 3])
def test_other_format_versions_are_refused_naming_the_supported_ones(value):
    with pytest.raises(BadRequest, match="format versions 1 to 2"):
        hms_bounds.format_version(value)


def test_an_upgrade_to_v3_is_refused_in_the_body():
    body = json.dumps({"updates": [{"action": "upgrade-format-version", "format-version": 3}]}).encode()
    with pytest.raises(BadRequest, match="format-version"):
        bodies.commit_request(body)


def test_properties_pyiceberg_reads_as_typed_must_parse():
    hms_bounds.table_properties({"write.object-storage.enabled": "true", "commit.retry.num-retries": "3"})
    with pytest.raises(BadRequest, match="integer"):
        hms_bounds.table_properties({"commit.retry.num-retries": "many"})
    assert hms_bounds.TYPED_PROPERTIES["write.object-storage.enabled"] is bool


def test_hms_widths_bound_keys_values_counts_and_columns():
    hms_bounds.table_properties({"k" * 256: "v" * 32672})
    for bad in ({"k" * 257: "v"}, {"k": "v" * 32673}, {f"k{i}": "v" for i in range(1001)}, {"": "v"}):
        with pytest.raises(BadRequest):
            hms_bounds.table_properties(bad)
    hms_bounds.namespace_properties({"k" * 180: "v" * 4000, "comment": "c" * 4000})
    for bad in ({"k" * 181: "v"}, {"k": "v" * 4001}, {"comment": "c" * 4001}, {"location": "/" + "l" * 4000}):
        with pytest.raises(BadRequest):
            hms_bounds.namespace_properties(bad)
    long_doc = {**SCHEMA, "fields": [{**SCHEMA["fields"][0], "doc": "d" * 257}]}
    with pytest.raises(BadRequest, match="256"):
        bodies.parse(bodies.CreateTableRequest, _create(schema=long_doc))


def test_nested_parts_of_a_commit_are_checked_too():
    dup = {**SCHEMA, "fields": [SCHEMA["fields"][0], {"id": 2, "name": "ID", "type": "int", "required": False}]}
    for update in ({"action": "add-schema", "schema": dup}, {"action": "set-location", "location": "/" + "x" * 4001},
                   {"action": "set-properties", "updates": {"write.object-storage.enabled": "maybe"}}):
        with pytest.raises(BadRequest):
            bodies.commit_request(json.dumps({"updates": [update]}).encode())


def test_a_plausible_body_passes():
    request = bodies.parse(bodies.CreateTableRequest, _create(properties={"format-version": "2", "owner": "x"}))
    assert request.name == "t"


# --- the error model --------------------------------------------------------------------------------

def test_hms_refusals_are_our_words_and_java_goes_to_the_log(caplog):
    exc = IDL.MetaException(message="java.lang.NullPointerException at org.apache.hadoop.hive.metastore.X")
    with caplog.at_level(logging.INFO, logger="gateway.iceberg.errors"):
        message = errors.hms_refused(exc, "table db.t")
    assert message == "the Hive Metastore refused table db.t"
    assert "MetaException" in caplog.text and "NullPointerException" in caplog.text


async def _serve(path: str, *, error=None, method="GET", headers=None):
    service = IcebergRestService("t", "ice", _Upstream(error), _Chain(), load_schema(), None, Limits(),
                                 IcebergRestOptions())
    request = make_mocked_request(method, "/gateway/t/ice" + path, headers=headers or {})
    request.content.feed_eof()
    event = AuditEvent(request_id="r-31", client=None)
    response, label = await service.handle(Exchange(request=request, event=event))
    return response, label


async def test_an_unexpected_exception_is_a_json_500_naming_the_request_id(caplog):
    with caplog.at_level(logging.ERROR):
        response, label = await _serve("/v1/namespaces", error=RuntimeError("secret detail /etc/x"))
    error = json.loads(response.body)["error"]
    assert response.status == 500 and error["code"] == 500 and error["type"] == "InternalServerError"
    assert "r-31" in error["message"] and "secret" not in error["message"] and label == "exception"
    assert "secret detail" in caplog.text  # the details are in the log


async def test_an_hms_exception_no_operation_expects_does_not_quote_it():
    response, _ = await _serve("/v1/namespaces", error=IDL.MetaException(message="java.lang.NullPointerException"))
    error = json.loads(response.body)["error"]
    assert response.status == 502 and "java" not in error["message"]


async def test_a_compressed_body_is_415_before_it_is_read():
    response, label = await _serve("/v1/namespaces", method="POST", headers={"Content-Encoding": "gzip"})
    assert response.status == 415 and response.headers["Accept-Encoding"] == "identity"
    assert json.loads(response.body)["error"]["type"] == "UnsupportedMediaTypeException"


@pytest.mark.parametrize("path", ["/v1/namespaces?pageToken=zzz", "/v1/namespaces?pageSize=-1",
                                  "/v1/namespaces/db/tables?pageToken=zzz", "/v1/namespaces/db/views?pageSize=0"])
async def test_a_bad_page_is_refused_before_hms_is_asked(path):
    from gateway.upstream.errors import UpstreamUnavailable
    response, _ = await _serve(path, error=UpstreamUnavailable("HMS was called"))
    assert response.status == 400, response.body
