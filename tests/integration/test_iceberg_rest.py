"""The ``iceberg-rest`` service against the real gateway, a real HMS (with lock support) and a
local warehouse, driven by PyIceberg's ``RestCatalog`` (auth type basic), PyIceberg's
``HiveCatalog`` directly on the same HMS, and raw HTTP for what PyIceberg does not send.
Every answer body is read back with PyIceberg's own response models or checked against the
spec's error model."""

from __future__ import annotations

import json
import re
import threading
from functools import partial

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import (
    ConfigResponse,
    ListNamespaceResponse,
    ListTablesResponse,
    TableResponse,
)
from pyiceberg.exceptions import (
    CommitFailedException,
    ForbiddenError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.support.gateway import RunningGateway, in_workdir
from tests.support.iceberg.clients import ETL_ALL_POLICY, call, error_of, rest_catalog
from tests.support.thrift_gen import hive_metastore_client, hive_metastore_modules

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

PATH = "iceberg"
USER, PASSWORD = "etl", "etl-password"


MAX_BODY = 64 * 1024  # small, so that an oversized body fits the socket buffers (no reset)
POLICY_PATH = "iceberg-policy"
POLICY = ETL_ALL_POLICY + """\
  - id: 2
    name: analyst reads sales
    resources: {database: [sales], table: ["*"], column: ["*"]}
    allow: [{users: [analyst], accesses: [select]}]
"""


@pytest.fixture(scope="module")
def gw(module_hms, module_gateway_factory) -> RunningGateway:
    """Two services on one HMS: ``PATH`` without a catalog policy, ``POLICY_PATH`` with one."""
    service = {"path": PATH, "kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]},
               "options": {"lock_check_min_wait_seconds": 0.02}}
    guarded = {**service, "path": POLICY_PATH, "policy_file": in_workdir("policy.yaml")}
    return module_gateway_factory(services=[service, guarded], files={"policy.yaml": POLICY},
                                  users={USER: PASSWORD, "analyst": "analyst-password"},
                                  limits={"max_request_bytes": MAX_BODY})


@pytest.fixture(scope="module")
def rest(gw):
    # not spec-checked: table_exists's HEAD 404 has no body, which the spec asks of that 404
    return rest_catalog(gw, user=USER, password=PASSWORD, validate=False)


_call = partial(call, auth=(USER, PASSWORD))


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "name": pa.array([f"n{i}" for i in range(start, start + n)], pa.string())})


SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def test_config_lists_exactly_the_implemented_endpoints(gw):
    answer = _call(gw, "GET", "/v1/config")
    assert answer.status_code == 200
    config = ConfigResponse.model_validate_json(answer.content)
    assert config.defaults == {} and config.overrides == {}
    assert {str(e) for e in config.endpoints} == {
        "GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces",
        "GET /v1/{prefix}/namespaces/{namespace}", "HEAD /v1/{prefix}/namespaces/{namespace}",
        "DELETE /v1/{prefix}/namespaces/{namespace}", "POST /v1/{prefix}/namespaces/{namespace}/properties",
        "GET /v1/{prefix}/namespaces/{namespace}/tables", "POST /v1/{prefix}/namespaces/{namespace}/tables",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}", "POST /v1/{prefix}/tables/rename",
        "POST /v1/{prefix}/namespaces/{namespace}/register",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
        "POST /v1/{prefix}/transactions/commit",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
        "GET /v1/{prefix}/namespaces/{namespace}/views", "POST /v1/{prefix}/namespaces/{namespace}/views",
        "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}", "POST /v1/{prefix}/views/rename",
        "POST /v1/{prefix}/namespaces/{namespace}/register-view",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",  # the spec's signRequest (issue 49)
    }


def test_create_append_twice_read_back_and_hms_sees_an_iceberg_table(rest, hive_catalog, module_hms):
    rest.create_namespace("sales", {"comment": "Sales data", "team": "etl"})
    table = rest.create_table("sales.orders", schema=SCHEMA)
    table.append(_rows(0, 3))
    table.append(_rows(3, 2))

    loaded = rest.load_table("sales.orders")
    assert sorted(loaded.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 4]
    assert [s.summary.operation.value for s in loaded.snapshots()] == ["append", "append"]
    # HiveCatalog, reading HMS directly, sees the same table at the same metadata file
    direct = hive_catalog.load_table("sales.orders")
    assert direct.metadata_location == loaded.metadata_location
    assert direct.metadata_location.rsplit("/", 1)[1].startswith("00002-")
    client, transport = hive_metastore_client(module_hms.host, module_hms.port)
    try:
        raw = client.get_table("sales", "orders")
    finally:
        transport.close()
    assert raw.tableType == "EXTERNAL_TABLE" and raw.owner == USER
    assert raw.parameters["table_type"] == "ICEBERG" and raw.parameters["EXTERNAL"] == "TRUE"
    assert raw.parameters["previous_metadata_location"].rsplit("/", 1)[1].startswith("00001-")
    assert [(c.name, c.type) for c in raw.sd.cols] == [("id", "bigint"), ("name", "string")]
    assert rest.load_namespace_properties("sales")["comment"] == "Sales data"
    # HMS acted as the user (set_ugi), not as the gateway's account: its own audit log says so
    audit = module_hms.server.log_path.read_text()
    assert re.search(r"HiveMetaStore\.audit: ugi=etl\s.*cmd=source:\S+ create_table: Table\(tableName:orders", audit)
    assert re.search(r"HiveMetaStore\.audit: ugi=etl\s.*cmd=source:\S+ alter_table: db=sales tbl=orders", audit)


def test_schema_evolution_and_properties_reach_hms(rest, hive_catalog):
    rest.create_namespace("evolve")
    table = rest.create_table("evolve.t", schema=SCHEMA)
    table.append(_rows(0, 1))
    with table.update_schema() as update:
        update.add_column("price", LongType())
    with table.transaction() as tx:
        tx.set_properties({"owner_team": "etl"})
    loaded = rest.load_table("evolve.t")
    assert [f.name for f in loaded.schema().fields] == ["id", "name", "price"]
    assert loaded.properties["owner_team"] == "etl"
    assert [f.name for f in hive_catalog.load_table("evolve.t").schema().fields] == ["id", "name", "price"]


def test_rest_and_direct_hive_catalog_commits_interleave_without_loss(rest, hive_catalog):
    rest.create_namespace("shared")
    rest.create_table("shared.t", schema=SCHEMA)
    errors: list[BaseException] = []

    def append(catalog, start: int) -> None:
        try:
            for i in range(4):
                for attempt in range(20):
                    try:
                        catalog.load_table("shared.t").append(_rows(start + i, 1))
                        break
                    except CommitFailedException:
                        continue  # the loser of a race reloads and retries
                else:
                    raise AssertionError("no commit in 20 attempts")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(rest, 0)), threading.Thread(target=append, args=(hive_catalog, 100))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    table = rest.load_table("shared.t")
    assert len(table.snapshots()) == 8
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 100, 101, 102, 103]


def test_rename_and_drop(rest):
    rest.create_namespace("moves")
    rest.create_namespace("moved")
    rest.create_table("moves.a", schema=SCHEMA).append(_rows(0, 2))
    rest.rename_table("moves.a", "moved.b")
    assert not rest.table_exists("moves.a") and rest.table_exists("moved.b")
    assert rest.load_table("moved.b").scan().to_arrow().num_rows == 2
    with pytest.raises(NoSuchTableError):
        rest.rename_table("moves.a", "moved.c")
    rest.create_table("moves.d", schema=SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        rest.rename_table("moves.d", "moved.b")
    rest.drop_table("moved.b")
    assert not rest.table_exists("moved.b")
    with pytest.raises(NoSuchTableError):
        rest.drop_table("moved.b")


def test_drop_with_purge_deletes_the_files(rest, module_hms):
    rest.create_namespace("purged")
    table = rest.create_table("purged.t", schema=SCHEMA)
    table.append(_rows(0, 2))
    location = table.location().removeprefix("file:").removeprefix("//")
    from pathlib import Path
    files = [p for p in Path(location).rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files)
    rest.purge_table("purged.t")
    assert not rest.table_exists("purged.t")
    assert [p for p in Path(location).rglob("*") if p.is_file()] == []


def test_namespace_errors(rest, gw):
    rest.create_namespace("ns_errors")
    with pytest.raises(NamespaceAlreadyExistsError):
        rest.create_namespace("ns_errors")
    with pytest.raises(NoSuchNamespaceError):
        rest.load_namespace_properties("no_such_ns")
    rest.create_table("ns_errors.t", schema=SCHEMA)
    with pytest.raises(NamespaceNotEmptyError):
        rest.drop_namespace("ns_errors")
    answer = _call(gw, "POST", "/v1/namespaces/ns_errors/properties", {"removals": ["a"], "updates": {"a": "1"}})
    error_of(answer, 422, "UnprocessableEntityException")
    summary = rest.update_namespace_properties("ns_errors", removals={"gone"}, updates={"k": "v"})
    assert summary.updated == ["k"] and summary.missing == ["gone"]
    assert rest.load_namespace_properties("ns_errors")["k"] == "v"
    # HMS has one level: reading a nested namespace is the spec's 404, creating one 400 (issue 32)
    error_of(_call(gw, "GET", "/v1/namespaces/a%1Fb"), 404, "NoSuchNamespaceException")
    assert "nested namespaces" in error_of(_call(gw, "POST", "/v1/namespaces", {"namespace": ["a", "b"]}),
                                           400, "BadRequestException")["message"]


def test_names_hms_refuses_are_400_before_hms(rest, gw):
    error = error_of(_call(gw, "POST", "/v1/namespaces", {"namespace": ["bad-name"]}), 400, "BadRequestException")
    assert "bad-name" in error["message"]
    rest.create_namespace("names")
    error_of(_call(gw, "GET", "/v1/namespaces/names/tables/bad%20table"), 400)
    assert "bad_name" not in [n[0] for n in rest.list_namespaces()]


def test_a_hive_table_that_is_not_iceberg_is_not_listed_and_is_404(rest, gw, module_hms):
    rest.create_namespace("mixed")
    rest.create_table("mixed.ice", schema=SCHEMA)
    _, ttypes = hive_metastore_modules()
    client, transport = hive_metastore_client(module_hms.host, module_hms.port)
    try:
        sd = ttypes.StorageDescriptor(cols=[ttypes.FieldSchema("c", "int", None)], location=None,
                                      inputFormat="org.apache.hadoop.mapred.TextInputFormat",
                                      outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                                      serdeInfo=ttypes.SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"))
        client.create_table(ttypes.Table(tableName="plain", dbName="mixed", sd=sd, tableType="MANAGED_TABLE",
                                         parameters={}, partitionKeys=[]))
    finally:
        transport.close()
    assert rest.list_tables("mixed") == [("mixed", "ice")]
    error = error_of(_call(gw, "GET", "/v1/namespaces/mixed/tables/plain"), 404, "NoSuchTableException")
    assert "not an Iceberg table" in error["message"]


def test_listings_page(gw, rest):
    rest.create_namespace("paged")
    for i in range(5):
        rest.create_table(f"paged.t{i}", schema=SCHEMA)
    seen, token, pages = [], "", 0
    while token is not None:
        answer = _call(gw, "GET", f"/v1/namespaces/paged/tables?pageSize=2&pageToken={token}")
        assert answer.status_code == 200
        page = ListTablesResponse.model_validate_json(answer.content)
        assert len(page.identifiers) <= 2
        seen += [t.name for t in page.identifiers]
        token, pages = page.next_page_token, pages + 1
    assert seen == [f"t{i}" for i in range(5)] and pages == 3
    first = ListNamespaceResponse.model_validate_json(_call(gw, "GET", "/v1/namespaces?pageSize=1&pageToken=").content)
    assert len(first.namespaces) == 1 and first.next_page_token
    error_of(_call(gw, "GET", "/v1/namespaces?pageToken=not-a-token"), 400, "BadRequestException")


def test_load_table_etag_and_not_modified(gw, rest):
    rest.create_namespace("etags")
    rest.create_table("etags.t", schema=SCHEMA)
    first = _call(gw, "GET", "/v1/namespaces/etags/tables/t")
    assert first.status_code == 200 and first.headers["ETag"]
    same = _call(gw, "GET", "/v1/namespaces/etags/tables/t", headers={"If-None-Match": first.headers["ETag"]})
    assert same.status_code == 304 and same.content == b""
    rest.load_table("etags.t").append(_rows(0, 1))
    again = _call(gw, "GET", "/v1/namespaces/etags/tables/t", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 200 and again.headers["ETag"] != first.headers["ETag"]


def test_load_table_snapshots_refs_leaves_out_unreferenced_snapshots(gw, rest):
    rest.create_namespace("refs")
    table = rest.create_table("refs.t", schema=SCHEMA)
    table.append(_rows(0, 1))
    table.append(_rows(1, 1))
    every = TableResponse.model_validate_json(_call(gw, "GET", "/v1/namespaces/refs/tables/t?snapshots=all").content)
    answer = _call(gw, "GET", "/v1/namespaces/refs/tables/t?snapshots=refs")
    referenced = TableResponse.model_validate_json(answer.content).metadata
    assert answer.status_code == 200 and len(every.metadata.snapshots) == 2
    assert [s.snapshot_id for s in referenced.snapshots] == [every.metadata.current_snapshot_id]
    error_of(_call(gw, "GET", "/v1/namespaces/refs/tables/t?snapshots=some"), 400, "BadRequestException")


def test_stale_requirement_is_409_commit_failed(gw, rest):
    rest.create_namespace("stale")
    table = rest.create_table("stale.t", schema=SCHEMA)
    table.append(_rows(0, 1))
    body = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}],
            "updates": [{"action": "set-properties", "updates": {"x": "y"}}]}
    error_of(_call(gw, "POST", "/v1/namespaces/stale/tables/t", body), 409, "CommitFailedException")
    assert "x" not in rest.load_table("stale.t").properties


def test_a_stale_writer_gets_409_without_waiting_for_the_lock(gw, rest, module_hms):
    """Requirements are checked before the lock too: with HMS's lock on the table held by
    another writer, a stale commit is refused for its requirement, not after the lock wait."""
    rest.create_namespace("held")
    table = rest.create_table("held.t", schema=SCHEMA)
    table.append(_rows(0, 1))
    _, ttypes = hive_metastore_modules()
    client, transport = hive_metastore_client(module_hms.host, module_hms.port)
    component = ttypes.LockComponent(type=ttypes.LockType.EXCLUSIVE, level=ttypes.LockLevel.TABLE,
                                     dbname="held", tablename="t")
    lock = client.lock(ttypes.LockRequest(component=[component], user="other", hostname="test"))
    try:
        assert lock.state == ttypes.LockState.ACQUIRED
        body = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}],
                "updates": [{"action": "set-properties", "updates": {"x": "y"}}]}
        error = error_of(_call(gw, "POST", "/v1/namespaces/held/tables/t", body), 409, "CommitFailedException")
        assert error["message"].startswith("Requirement failed"), error  # not the lock wait's 409
    finally:
        client.unlock(ttypes.UnlockRequest(lockid=lock.lockid))
        transport.close()
    # with the lock free, a commit whose requirements hold lands (the pre-checked work reused)
    current = rest.load_table("held.t")
    body["requirements"][0]["snapshot-id"] = current.current_snapshot().snapshot_id
    answer = _call(gw, "POST", "/v1/namespaces/held/tables/t", body)
    assert answer.status_code == 200, answer.content
    assert rest.load_table("held.t").properties["x"] == "y"


def test_hostile_bodies_are_400_in_the_error_model(gw, rest):
    rest.create_namespace("hostile")
    rest.create_table("hostile.t", schema=SCHEMA)
    for body in (b"{", b"[]", b"[" * 60000, json.dumps({"updates": [{"action": "no-such-update"}]}).encode(),
                 json.dumps({"requirements": [{"type": "no-such-requirement"}]}).encode(),
                 json.dumps({"updates": "not a list"}).encode()):
        error_of(_call(gw, "POST", "/v1/namespaces/hostile/tables/t", body), 400, "BadRequestException")
    oversized = _call(gw, "POST", "/v1/namespaces/hostile/tables/t", b" " * (MAX_BODY + 4096))
    error_of(oversized, 400, "BadRequestException")  # the spec lists no 413
    assert rest.load_table("hostile.t").metadata_location.rsplit("/", 1)[1].startswith("00000-")


def test_unknown_paths_methods_and_credentials(gw):
    error_of(_call(gw, "GET", "/v1/nothing-here", validate=False), 404, "NotFoundException")  # no operation
    answer = _call(gw, "PUT", "/v1/namespaces", validate=False)
    assert answer.status_code == 405 and set(answer.headers["Allow"].split(", ")) == {"GET", "POST"}
    answer = _call(gw, "GET", "/v1/config", auth=None)
    error_of(answer, 401, "NotAuthorizedException")
    assert answer.headers["WWW-Authenticate"].startswith("Basic")
    assert _call(gw, "GET", "/v1/config", auth=(USER, "wrong")).status_code == 401


def test_policy_filters_listings_hides_with_404_and_denies_with_403(gw, rest):
    rest.create_namespace("secret")
    rest.create_table("secret.t", schema=SCHEMA)
    if not rest.namespace_exists("sales"):  # also made by another test of this module
        rest.create_namespace("sales")
    if not rest.table_exists("sales.orders"):
        rest.create_table("sales.orders", schema=SCHEMA)
    analyst = rest_catalog(gw, user="analyst", password="analyst-password", path=POLICY_PATH, validate=False)
    assert analyst.list_namespaces() == [("sales",)]
    assert ("sales", "orders") in analyst.list_tables("sales")
    assert analyst.load_table("sales.orders").schema().find_field("id")
    with pytest.raises(NoSuchTableError):
        analyst.load_table("secret.t")
    with pytest.raises(NoSuchNamespaceError):
        analyst.list_tables("secret")
    with pytest.raises(ForbiddenError, match="analyst may not alter sales.orders"):
        with analyst.load_table("sales.orders").transaction() as tx:
            tx.set_properties({"x": "y"})
    with pytest.raises(ForbiddenError):
        analyst.create_namespace("mine")
    with pytest.raises(ForbiddenError):
        analyst.drop_table("sales.orders")
    etl = rest_catalog(gw, user=USER, password=PASSWORD, path=POLICY_PATH, validate=False)
    assert ("secret",) in etl.list_namespaces() and etl.table_exists("secret.t")


def test_a_staged_create_stores_nothing_until_its_commit(rest, hive_catalog):
    rest.create_namespace("staged")
    tx = rest.create_table_transaction("staged.t", schema=SCHEMA)
    assert not rest.table_exists("staged.t")
    tx.append(_rows(0, 3))
    tx.commit_transaction()
    table = rest.load_table("staged.t")
    assert table.scan().to_arrow().num_rows == 3
    assert hive_catalog.load_table("staged.t").metadata_location == table.metadata_location
    assert table.metadata_location.rsplit("/", 1)[1].startswith("00000-")
    with pytest.raises(TableAlreadyExistsError):
        rest.create_table_transaction("staged.t", schema=SCHEMA)


def test_a_create_commit_on_an_existing_table_is_409(gw, rest):
    if not rest.namespace_exists("staged"):
        rest.create_namespace("staged")
    rest.create_table("staged.taken", schema=SCHEMA)
    answer = _call(gw, "POST", "/v1/namespaces/staged/tables/taken",
                   {"requirements": [{"type": "assert-create"}], "updates": []})
    error_of(answer, 409, "CommitFailedException")
