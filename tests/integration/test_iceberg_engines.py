"""Real Iceberg engines against the gateway's ``iceberg-rest`` service, as `make run` serves it:
OAuth2 client credentials from the topology's ``gateway-token`` provider, TLS verified against
the test CA, warehouse ``demo`` answered as a ``prefix`` (issue 32).

- PyIceberg's catalog cases (its own integration suite's): a missing namespace dropped, namespace
  properties HMS cannot change, schema evolution that drops and reorders columns, listings'
  ``next-page-token``, purge and drop leaving no directories, warehouses;
- Iceberg Java's metadata-table lookup (``ns.t.snapshots``: 404, then the fallback);
- DuckDB 1.4 with its ``iceberg``, ``httpfs`` and ``avro`` extensions from PyPI, writing and
  reading;
- iceberg-js from npm (tests/node/iceberg_js_client.mjs) with its ``warehouse`` option.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import BadRequestError, NoSuchNamespaceError, RESTError
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest, TableIdentifier
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, StructType

from gateway.iceberg.hms_refusals import SETTING
from tests.support.gateway import RunningGateway, htpasswd_provider
from tests.support.hms import start_hms
from tests.support.iceberg.clients import call, error_of, rest_catalog

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

USER, PASSWORD = "etl", "etl-password"
KEY = "an-hs256-key-of-more-than-thirty-two-bytes-for-engines"
NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False),
                NestedField(3, "score", DoubleType(), required=False))


def _topology(hms_uri: str, key_file: Path) -> dict:
    providers = [htpasswd_provider(), {"type": "gateway-token", "signing_key": f"file:{key_file}"}]
    service = {"path": "iceberg", "kind": "iceberg-rest", "upstream": {"urls": [hms_uri]},
               "options": {"lock_check_min_wait_seconds": 0.02,
                           "warehouses": {"demo": {"databases": ["*"]}, "lake": {"databases": ["lake_*"]}}}}
    return {"default": {"providers": {"authentication": providers}, "services": [service]}}


@pytest.fixture(scope="module")
def key_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("engine-key") / "token.key"
    path.write_text(KEY)
    return path


@pytest.fixture(scope="module")
def gw(module_hms, key_file, module_gateway_factory) -> RunningGateway:
    return module_gateway_factory(topologies=_topology(module_hms.uri, key_file), users={USER: PASSWORD})


@pytest.fixture(scope="module")
def rest(gw):
    return rest_catalog(gw, credential=f"{USER}:{PASSWORD}", warehouse="demo")


# --- PyIceberg's catalog cases --------------------------------------------------------------------

def test_dropping_a_missing_namespace_is_404_no_such_namespace(rest):
    with pytest.raises(NoSuchNamespaceError):
        rest.drop_namespace("never_created")


def test_namespace_properties_hms_cannot_change_are_refused_and_nothing_changes(rest):
    rest.create_namespace("props_ns", {"comment": "first", "owner_team": "a"})
    with pytest.raises(RESTError, match="HMS 2.3 cannot change"):
        rest.update_namespace_properties("props_ns", updates={"comment": "second", "owner_team": "b"})
    assert rest.load_namespace_properties("props_ns") | {"location": None} == \
        {"comment": "first", "owner_team": "a", "location": None}
    summary = rest.update_namespace_properties("props_ns", removals={"nothing"}, updates={"owner_team": "b"})
    assert (summary.updated, summary.missing) == (["owner_team"], ["nothing"])
    assert rest.load_namespace_properties("props_ns")["owner_team"] == "b"


def test_schema_changes_that_drop_and_reorder_columns_commit(rest):
    rest.create_namespace("evolve")
    table = rest.create_table("evolve.t", schema=SCHEMA)
    with table.update_schema() as update:
        update.delete_column("name")
    with table.update_schema() as update:
        update.move_first("score")
    assert [f.name for f in rest.load_table("evolve.t").schema().fields] == ["score", "id"]


#: HMS 2.3 converts most primitive types into each other; a struct where a double was it refuses.
POINTS = Schema(NestedField(1, "id", LongType(), required=False),
                NestedField(2, "point", StructType(NestedField(3, "x", DoubleType(), required=False),
                                                   NestedField(4, "y", DoubleType(), required=False)), required=False),
                NestedField(5, "score", DoubleType(), required=False))


@pytest.fixture(scope="module")
def strict(tmp_path_factory, module_gateway_factory, key_file):
    """A catalog over an HMS with its column-type check on (HMS 2.3's default)."""
    hms = start_hms(tmp_path_factory.mktemp("hms-strict"), site={SETTING: "true"})
    try:
        gw = module_gateway_factory(topologies=_topology(hms.uri, key_file), users={USER: PASSWORD})
        catalog = rest_catalog(gw, credential=f"{USER}:{PASSWORD}")
        catalog.create_namespace("strict")
        yield gw, catalog
    finally:
        hms.server.stop()


def test_hms_refusing_a_column_change_is_a_400_naming_its_setting(strict):
    _, catalog = strict
    table = catalog.create_table("strict.t", schema=POINTS)
    before = table.metadata_location
    with pytest.raises(BadRequestError, match=SETTING):
        with table.update_schema() as update:
            update.delete_column("point")
    assert catalog.load_table("strict.t").metadata_location == before


def test_in_a_transaction_hms_s_column_refusal_is_the_same_400_and_all_is_put_back(strict):
    gw, catalog = strict
    first, second = catalog.create_table("strict.a", schema=SCHEMA), catalog.create_table("strict.b", schema=POINTS)
    change = second.transaction()
    with change.update_schema() as update:
        update.delete_column("point")
    schema_change = CommitTableRequest(identifier=TableIdentifier(namespace=["strict"], name="b"),
                                       requirements=change._requirements, updates=change._updates)
    answer = call(gw, "POST", "/v1/transactions/commit", {"table-changes": [
        {"identifier": {"namespace": ["strict"], "name": "a"}, "requirements": [],
         "updates": [{"action": "set-properties", "updates": {"k": "a"}}]},
        json.loads(schema_change.model_dump_json(by_alias=True, exclude_none=True)),
    ]}, auth=(USER, PASSWORD))
    message = error_of(answer, 400, "BadRequestException")["message"]
    assert SETTING in message and "tables put back: strict.a" in message
    assert catalog.load_table("strict.a").metadata_location == first.metadata_location
    assert catalog.load_table("strict.b").metadata_location == second.metadata_location


@pytest.mark.parametrize("path", ["/v1/namespaces", "/v1/namespaces?pageSize=1000",
                                  "/v1/namespaces/evolve/tables", "/v1/namespaces/evolve/views"])
def test_a_last_page_and_an_unpaged_listing_say_next_page_token_null(gw, rest, path):
    rest.create_namespace_if_not_exists("evolve")
    answer = call(gw, "GET", path, auth=(USER, PASSWORD))
    assert answer.status_code == 200 and answer.json()["next-page-token"] is None


def test_purge_and_namespace_drop_leave_no_directories(rest, module_hms):
    rest.create_namespace("purged")
    table = rest.create_table("purged.t", schema=SCHEMA)
    table.append(pa.Table.from_pylist([{"id": 1, "name": "a", "score": 1.5}], schema=table.schema().as_arrow()))
    location = Path(table.location().removeprefix("file:"))
    namespace_dir = Path(rest.load_namespace_properties("purged")["location"].removeprefix("file:"))
    assert location.is_dir() and namespace_dir.is_dir()
    rest.purge_table("purged.t")
    assert not location.exists()
    rest.drop_namespace("purged")
    assert not namespace_dir.exists()


# --- Java's metadata tables -------------------------------------------------------------------------

@pytest.mark.parametrize("method, kind, what", [("GET", "tables", "NoSuchTableException"),
                                                ("HEAD", "tables", None),
                                                ("GET", "views", "NoSuchViewException")])
def test_a_metadata_table_lookup_is_404_so_java_falls_back(gw, rest, method, kind, what):
    rest.create_namespace_if_not_exists("evolve")
    # a HEAD's 404 is not spec-checked: it has no body, which the spec asks of that 404
    answer = call(gw, method, f"/v1/demo/namespaces/evolve%1Ft/{kind}/snapshots", auth=(USER, PASSWORD),
                  validate=method != "HEAD")
    assert answer.status_code == 404
    if what:
        assert error_of(answer, 404, what)["message"].endswith("(the Hive Metastore has one namespace level)")


# --- warehouses ------------------------------------------------------------------------------------

def test_a_warehouse_serves_its_databases_under_its_prefix(gw):
    lake = rest_catalog(gw, credential=f"{USER}:{PASSWORD}", warehouse="lake", name="lake")
    lake.create_namespace("lake_sales")
    with pytest.raises(RESTError):
        lake.create_namespace("outside")
    assert lake.list_namespaces() == [("lake_sales",)]
    answer = call(gw, "GET", "/v1/config?warehouse=s3://bucket/wh", auth=(USER, PASSWORD))
    assert "its warehouses: demo, lake" in error_of(answer, 400, "BadRequestException")["message"]


# --- DuckDB ------------------------------------------------------------------------------------------

def test_duckdb_writes_and_reads_through_the_gateway_with_oauth2_and_verified_tls(gw, rest):
    from tests.support.duckdb_engine import duckdb_connection

    rest.create_namespace_if_not_exists("duck")
    con = duckdb_connection()
    con.execute(f"SET ca_cert_file = '{gw.ca_file}'")
    con.execute(f"""CREATE SECRET gw (TYPE ICEBERG, CLIENT_ID '{USER}', CLIENT_SECRET '{PASSWORD}',
                    OAUTH2_SERVER_URI '{gw.url(path="iceberg")}/v1/oauth/tokens')""")
    con.execute(f"""ATTACH 'demo' AS demo (TYPE ICEBERG, ENDPOINT '{gw.url(path="iceberg")}', SECRET gw,
                    ACCESS_DELEGATION_MODE 'none')""")
    con.execute("CREATE TABLE demo.duck.birds (id BIGINT, name VARCHAR)")
    con.execute("INSERT INTO demo.duck.birds VALUES (1, 'heron'), (2, 'swift')")
    assert con.execute("SELECT name FROM demo.duck.birds ORDER BY id").fetchall() == [("heron",), ("swift",)]
    assert sorted(rest.load_table("duck.birds").scan().to_arrow().column("name").to_pylist()) == ["heron", "swift"]
    con.execute("DROP TABLE demo.duck.birds")
    con.close()


def test_duckdb_refuses_a_gateway_its_ca_file_does_not_vouch_for(gw, tmp_path):
    import duckdb

    from gateway.certs import write_dev_certificates
    from tests.support.duckdb_engine import duckdb_connection

    other = write_dev_certificates(tmp_path / "other-ca")
    con = duckdb_connection()
    con.execute(f"SET ca_cert_file = '{other.ca_certificate}'")
    with pytest.raises(duckdb.Error, match="SSL server verification failed"):  # its first call: the token
        con.execute(f"""CREATE SECRET gw (TYPE ICEBERG, CLIENT_ID '{USER}', CLIENT_SECRET '{PASSWORD}',
                        OAUTH2_SERVER_URI '{gw.url(path="iceberg")}/v1/oauth/tokens')""")
    con.close()


# --- iceberg-js --------------------------------------------------------------------------------------

def test_iceberg_js_with_its_warehouse_option(gw, tmp_path):
    config = tmp_path / "iceberg-js.json"
    config.write_text(json.dumps({"uri": gw.url(path="iceberg"), "warehouse": "demo", "user": USER,
                                  "password": PASSWORD, "namespace": "from_js"}))
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": str(gw.ca_file)}
    done = subprocess.run(["node", "iceberg_js_client.mjs", str(config)], cwd=NODE_DIR, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "token_type": "bearer", "prefix": "demo", "namespaces": seen["namespaces"], "properties": "iceberg-js",
        "created_format_version": 2, "tables": ["events"], "next_page_token": None, "not_modified": True,
        "committed_property": "from iceberg-js",
        "conflict": {"status": 409, "type": "CommitFailedException"}, "exists_after_drop": False,
    }
    assert "from_js" in seen["namespaces"]
