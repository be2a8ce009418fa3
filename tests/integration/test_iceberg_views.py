"""Iceberg views through the ``iceberg-rest`` service, against the real gateway, a real HMS (with
lock support) and a local warehouse: PyIceberg 0.12's ``RestCatalog`` for what it has
(``create_view``, ``load_view``, ``list_views``, ``view_exists``, ``drop_view``) and plain HTTP
for the rest (replace, rename, paging, errors). The HMS table is read directly and checked
against what Java's ``HiveCatalog`` writes for a view; every answer, PyIceberg's included, is
checked against the spec (:mod:`tests.support.iceberg.spec`)."""

from __future__ import annotations

import gzip
import json
from functools import partial
from pathlib import Path

import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    ForbiddenError,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewMetadata, ViewRepresentation, ViewVersion

from tests.support.gateway import RunningGateway, in_workdir
from tests.support.iceberg.clients import ETL_ALL_POLICY, call, error_of, rest_catalog
from tests.support.thrift_gen import hive_metastore_client

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("pyiceberg_env")]

PATH, POLICY_PATH = "iceberg", "iceberg-policy"
USER, PASSWORD = "etl", "etl-password"
POLICY = ETL_ALL_POLICY + """\
  - id: 2
    name: analyst reads the public views of sales
    resources: {database: [sales], table: ["pub_*"], column: ["*"]}
    allow: [{users: [analyst], accesses: [select]}]
  - id: 3
    name: dev changes sales, only reads archive
    resources: {database: [sales, archive], table: ["*"], column: ["*"]}
    allow: [{users: [dev], accesses: [select]}]
  - id: 4
    name: dev alters sales
    resources: {database: [sales], table: ["*"], column: ["*"]}
    allow: [{users: [dev], accesses: [alter]}]
"""
MAX_BODY = 64 * 1024  # small, so that an oversized body fits the socket buffers (no reset)
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))
SCHEMA_JSON = json.loads(SCHEMA.model_dump_json())
VIEW_ENDPOINTS = {
    "GET /v1/{prefix}/namespaces/{namespace}/views", "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}", "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}", "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename", "POST /v1/{prefix}/namespaces/{namespace}/register-view",
}


@pytest.fixture(scope="module")
def gw(module_hms, module_gateway_factory) -> RunningGateway:
    """``PATH`` without a catalog policy, ``POLICY_PATH`` with one, on one HMS."""
    service = {"path": PATH, "kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]},
               "options": {"lock_check_min_wait_seconds": 0.02}}
    guarded = {**service, "path": POLICY_PATH, "policy_file": in_workdir("policy.yaml")}
    return module_gateway_factory(services=[service, guarded], files={"policy.yaml": POLICY},
                                  users={USER: PASSWORD, "analyst": "analyst-password", "dev": "dev-password"},
                                  limits={"max_request_bytes": MAX_BODY})


def _rest(gw: RunningGateway, user: str = USER, password: str = PASSWORD, path: str = PATH) -> RestCatalog:
    return rest_catalog(gw, user=user, password=password, path=path)


@pytest.fixture(scope="module")
def rest(gw) -> RestCatalog:
    return _rest(gw)


_call = partial(call, auth=(USER, PASSWORD))


def _version(sql: str, namespace: str, schema_id: int = 0, dialect: str = "spark") -> ViewVersion:
    return ViewVersion(**{"version-id": 1, "schema-id": schema_id, "summary": {"engine-name": "pytest"},
                          "default-namespace": [namespace],
                          "representations": [ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect=dialect))]})


def _create(rest: RestCatalog, identifier: str, sql: str = "select 1", **kwargs):
    namespace = identifier.split(".")[0]
    try:  # not namespace_exists: the spec gives its HEAD 404 a body, which HEAD cannot carry
        rest.create_namespace(namespace)
    except NamespaceAlreadyExistsError:
        pass
    return rest.create_view(identifier, SCHEMA, _version(sql, namespace), **kwargs)


def _hms_table(module_hms, db: str, name: str):
    client, transport = hive_metastore_client(module_hms.host, module_hms.port)
    try:
        return client.get_table(db, name)
    finally:
        transport.close()


def _replace_body(sql: str, namespace: str, view_uuid: str | None = None, **extra) -> dict:
    version = json.loads(_version(sql, namespace).model_dump_json())
    body = {"updates": [{"action": "add-view-version", "view-version": version},
                        {"action": "set-current-view-version", "view-version-id": -1}, *extra.pop("more", [])],
            **extra}
    if view_uuid:
        body["requirements"] = [{"type": "assert-view-uuid", "uuid": view_uuid}]
    return body


def _metadata_files(location: str) -> list[str]:
    directory = Path(location.removeprefix("file:")) / "metadata"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_config_lists_the_view_endpoints(gw):
    response = _call(gw, "GET", "/v1/config")
    assert response.status_code == 200 and VIEW_ENDPOINTS <= set(response.json()["endpoints"])


def test_create_load_list_and_exists_with_pyiceberg_and_hms_holds_it_as_java_s_hive_catalog(rest, module_hms):
    _create(rest, "shop.big_orders", "select * from shop.orders where amount > 100",
            properties={"comment": "big ones", "hive.metastore.table.owner": "someone"})
    rest.create_table("shop.orders", schema=SCHEMA)
    view = rest.load_view("shop.big_orders")
    assert view.current_version().representations[0].root.sql.endswith("amount > 100")
    assert view.current_version().version_id == 1 and view.schema().schema_id == 0
    assert view.properties["comment"] == "big ones" and len(view.metadata.version_log) == 1
    assert rest.view_exists("shop.big_orders") and not rest.view_exists("shop.orders")
    assert rest.list_views("shop") == [("shop", "big_orders")]
    assert rest.list_tables("shop") == [("shop", "orders")]  # views are not tables

    hms = _hms_table(module_hms, "shop", "big_orders")
    parameters = hms.parameters
    assert hms.tableType == "VIRTUAL_VIEW" and hms.owner == USER and hms.retention == 2147483647
    assert parameters["table_type"] == "ICEBERG-VIEW" and "EXTERNAL" not in parameters
    assert parameters["uuid"] == str(view.uuid()) and parameters["comment"] == "big ones"
    assert "hive.metastore.table.owner" not in parameters and "previous_metadata_location" not in parameters
    assert json.loads(parameters["current-schema"])["fields"] == SCHEMA_JSON["fields"]
    assert hms.sd.location == view.location() and [(c.name, c.type) for c in hms.sd.cols] == [
        ("id", "bigint"), ("name", "string")]
    location = parameters["metadata_location"]
    assert location.startswith(view.location() + "/metadata/00000-") and location.endswith(".gz.metadata.json")
    stored = ViewMetadata.model_validate_json(gzip.decompress(Path(location.removeprefix("file:")).read_bytes()))
    assert stored == view.metadata


def test_replace_adds_a_version_under_the_commit_protocol(gw, rest, module_hms):
    view = _create(rest, "shop.daily", "select 1")
    first = _hms_table(module_hms, "shop", "daily").parameters["metadata_location"]
    body = _replace_body("select 2", "shop", str(view.uuid()),
                         more=[{"action": "set-properties", "updates": {"owner_team": "finance"}},
                               {"action": "remove-properties", "removals": ["absent"]}])
    response = _call(gw, "POST", "/v1/namespaces/shop/views/daily", body)
    assert response.status_code == 200
    answer = response.json()
    metadata = ViewMetadata.model_validate(answer["metadata"])
    assert metadata.current_version_id == 2 and [e.version_id for e in metadata.version_log] == [1, 2]
    assert answer["metadata-location"].rsplit("/", 1)[1].startswith("00001-")
    parameters = _hms_table(module_hms, "shop", "daily").parameters
    assert parameters["metadata_location"] == answer["metadata-location"]
    assert parameters["previous_metadata_location"] == first and parameters["owner_team"] == "finance"
    assert rest.load_view("shop.daily").current_version().representations[0].root.sql == "select 2"

    removed = _call(gw, "POST", "/v1/namespaces/shop/views/daily",
                    {"updates": [{"action": "remove-properties", "removals": ["owner_team"]}]})
    assert removed.status_code == 200 and "owner_team" not in _hms_table(module_hms, "shop", "daily").parameters
    unchanged = _call(gw, "POST", "/v1/namespaces/shop/views/daily", {"updates": []})
    assert unchanged.json()["metadata-location"] == removed.json()["metadata-location"]  # no new file
    assert len(_metadata_files(metadata.location)) == 3


def test_list_views_pages(gw, rest):
    for i in range(5):
        _create(rest, f"paged.v{i}")
    rest.create_table("paged.t", schema=SCHEMA)
    seen, token, pages = [], "", 0
    while token is not None:
        response = _call(gw, "GET", f"/v1/namespaces/paged/views?pageSize=2&pageToken={token}")
        assert response.status_code == 200
        page = response.json()
        assert len(page["identifiers"]) <= 2
        seen += [i["name"] for i in page["identifiers"]]
        token, pages = page.get("next-page-token"), pages + 1
    assert seen == [f"v{i}" for i in range(5)] and pages == 3
    error_of(_call(gw, "GET", "/v1/namespaces/paged/views?pageToken=not-a-token"), 400, "BadRequestException")


def test_exists_is_204_or_404_without_a_body(gw, rest):
    _create(rest, "probe.v")
    present = _call(gw, "HEAD", "/v1/namespaces/probe/views/v")
    missing = _call(gw, "HEAD", "/v1/namespaces/probe/views/nothing")
    assert (present.status_code, present.content) == (204, b"")
    assert (missing.status_code, missing.content) == (404, b"")


def test_rename_within_and_across_namespaces_and_drop(gw, rest, module_hms):
    _create(rest, "moves.v")
    rest.create_namespace("landing")
    rest.create_table("landing.taken", schema=SCHEMA)
    rename = {"source": {"namespace": ["moves"], "name": "v"}, "destination": {"namespace": ["moves"], "name": "w"}}
    assert _call(gw, "POST", "/v1/views/rename", rename).status_code == 204
    assert not rest.view_exists("moves.v") and rest.view_exists("moves.w")
    across = {"source": {"namespace": ["moves"], "name": "w"}, "destination": {"namespace": ["landing"], "name": "w"}}
    assert _call(gw, "POST", "/v1/views/rename", across).status_code == 204
    assert rest.list_views("moves") == [] and rest.list_views("landing") == [("landing", "w")]
    assert _hms_table(module_hms, "landing", "w").parameters["table_type"] == "ICEBERG-VIEW"
    assert rest.load_view("landing.w").current_version().version_id == 1

    onto_table = {"source": {"namespace": ["landing"], "name": "w"}, "destination": {"namespace": ["landing"], "name": "taken"}}
    refused = error_of(_call(gw, "POST", "/v1/views/rename", onto_table), 409, "AlreadyExistsException")
    assert "Table already exists" in refused["message"]
    gone = {**rename, "source": {"namespace": ["moves"], "name": "v"}}
    error_of(_call(gw, "POST", "/v1/views/rename", gone), 404, "NoSuchViewException")
    nowhere = {"source": {"namespace": ["landing"], "name": "w"}, "destination": {"namespace": ["nowhere"], "name": "w"}}
    error_of(_call(gw, "POST", "/v1/views/rename", nowhere), 404, "NoSuchNamespaceException")

    rest.drop_view("landing.w")
    assert not rest.view_exists("landing.w") and rest.table_exists("landing.taken")
    with pytest.raises(NoSuchViewError):
        rest.drop_view("landing.w")


def test_tables_and_views_do_not_pass_for_each_other(gw, rest):
    _create(rest, "mixed.v")
    rest.create_table("mixed.t", schema=SCHEMA)
    error = error_of(_call(gw, "GET", "/v1/namespaces/mixed/tables/v"), 404, "NoSuchTableException")
    assert "is an Iceberg view" in error["message"]
    error = error_of(_call(gw, "GET", "/v1/namespaces/mixed/views/t"), 404, "NoSuchViewException")
    assert "is an Iceberg table" in error["message"]
    with pytest.raises(NoSuchTableError):
        rest.drop_table("mixed.v")
    with pytest.raises(NoSuchViewError):
        rest.drop_view("mixed.t")
    with pytest.raises(NoSuchViewError):
        rest.load_view("mixed.t")
    body = {"name": "t", "schema": SCHEMA_JSON, "properties": {},
            "view-version": json.loads(_version("select 1", "mixed").model_dump_json())}
    error = error_of(_call(gw, "POST", "/v1/namespaces/mixed/views", body), 409, "AlreadyExistsException")
    assert "Table already exists" in error["message"]
    error = error_of(_call(gw, "POST", "/v1/namespaces/mixed/views", {**body, "name": "v"}), 409,
                     "AlreadyExistsException")
    assert "View already exists" in error["message"]
    table = {"name": "v", "schema": SCHEMA_JSON}
    error = error_of(_call(gw, "POST", "/v1/namespaces/mixed/tables", table), 409, "AlreadyExistsException")
    assert "View already exists" in error["message"]
    assert rest.list_tables("mixed") == [("mixed", "t")] and rest.list_views("mixed") == [("mixed", "v")]


def test_bad_requests_are_400_and_write_nothing_stale_ones_409(gw, rest, module_hms):
    view = _create(rest, "errs.v")
    before = _hms_table(module_hms, "errs", "v").parameters["metadata_location"]
    files = _metadata_files(view.location())
    for body in (b"{", b"[]", {"updates": [{"action": "add-snapshot", "snapshot": {}}]},
                 {"updates": [{"action": "no-such-update"}]},
                 {"updates": [], "requirements": [{"type": "assert-table-uuid", "uuid": str(view.uuid())}]},
                 {"updates": [{"action": "set-current-view-version", "view-version-id": 7}]},
                 {"updates": [{"action": "upgrade-format-version", "format-version": 2}]},
                 {"updates": [{"action": "set-properties", "updates": {"write.metadata.compression-codec": "lz4"}}]},
                 {"identifier": {"namespace": ["errs"], "name": "other"}, "updates": []}):
        response = _call(gw, "POST", "/v1/namespaces/errs/views/v", body)
        error_of(response, 400, "BadRequestException")
    stale = _replace_body("select 2", "errs", "00000000-0000-0000-0000-000000000000")
    error = error_of(_call(gw, "POST", "/v1/namespaces/errs/views/v", stale), 409, "CommitFailedException")
    assert "view UUID does not match" in error["message"]
    assert _hms_table(module_hms, "errs", "v").parameters["metadata_location"] == before
    assert _metadata_files(view.location()) == files

    error_of(_call(gw, "GET", "/v1/namespaces/errs/views/missing"), 404, "NoSuchViewException")
    error_of(_call(gw, "POST", "/v1/namespaces/errs/views/missing", {"updates": []}), 404, "NoSuchViewException")
    error_of(_call(gw, "GET", "/v1/namespaces/nowhere/views/v"), 404, "NoSuchNamespaceException")
    error_of(_call(gw, "GET", "/v1/namespaces/nowhere/views"), 404, "NoSuchNamespaceException")
    # HMS has one level: reading a nested namespace is the spec's 404, writing into one 400 (issue 32)
    error = error_of(_call(gw, "GET", "/v1/namespaces/errs%1Fsub/views"), 404, "NoSuchNamespaceException")
    assert "one namespace level" in error["message"]
    error = error_of(_call(gw, "GET", "/v1/namespaces/errs/views/bad-name"), 400, "BadRequestException")
    assert "invalid view name" in error["message"]
    create = {"name": "bad-name", "schema": SCHEMA_JSON, "properties": {},
              "view-version": json.loads(_version("select 1", "errs").model_dump_json())}
    error = error_of(_call(gw, "POST", "/v1/namespaces/errs/views", create), 400, "BadRequestException")
    assert "letters, digits" in error["message"]
    error_of(_call(gw, "POST", "/v1/namespaces/errs/views", {**create, "name": "ok", "schema": "no"}), 400,
             "BadRequestException")
    error_of(_call(gw, "POST", "/v1/namespaces/nowhere/views", {**create, "name": "ok"}), 404,
             "NoSuchNamespaceException")
    error = error_of(_call(gw, "POST", "/v1/namespaces/errs%1Fsub/views", {**create, "name": "ok"}), 400,
                     "BadRequestException")
    assert "nested namespaces" in error["message"]
    assert rest.list_views("errs") == [("errs", "v")]


def test_policy_hides_with_404_refuses_with_403_and_filters_listings(gw, rest):
    for name in ("pub_a", "private_b"):
        _create(rest, f"sales.{name}")
    _create(rest, "secret.v")
    rest.create_namespace("archive")
    analyst = _rest(gw, "analyst", "analyst-password", path=POLICY_PATH)
    assert analyst.list_views("sales") == [("sales", "pub_a")]
    assert analyst.load_view("sales.pub_a").current_version().version_id == 1
    assert analyst.view_exists("sales.pub_a") and not analyst.view_exists("sales.private_b")
    with pytest.raises(NoSuchViewError):
        analyst.load_view("sales.private_b")
    with pytest.raises(NoSuchNamespaceError):
        analyst.list_views("secret")
    with pytest.raises(ForbiddenError):
        analyst.drop_view("sales.pub_a")
    with pytest.raises(ForbiddenError):
        analyst.create_view("sales.pub_new", SCHEMA, _version("select 1", "sales"))
    replace = _replace_body("select 2", "sales")
    assert "analyst may not alter sales.pub_a" in error_of(
        _call(gw, "POST", "/v1/namespaces/sales/views/pub_a", replace, service=POLICY_PATH,
              auth=("analyst", "analyst-password")), 403, "ForbiddenException")["message"]
    error_of(_call(gw, "POST", "/v1/namespaces/sales/views/private_b", replace, service=POLICY_PATH,
                   auth=("analyst", "analyst-password")), 404, "NoSuchViewException")

    dev = ("dev", "dev-password")
    move = {"source": {"namespace": ["sales"], "name": "private_b"},
            "destination": {"namespace": ["archive"], "name": "private_b"}}
    error = error_of(_call(gw, "POST", "/v1/views/rename", move, service=POLICY_PATH, auth=dev), 403,
                     "ForbiddenException")
    assert "dev may not create archive" in error["message"]
    within = {**move, "destination": {"namespace": ["sales"], "name": "private_c"}}
    error_of(_call(gw, "POST", "/v1/views/rename", within, service=POLICY_PATH, auth=("analyst", "analyst-password")),
             404, "NoSuchViewException")  # analyst cannot see private_b
    answer = _call(gw, "POST", "/v1/namespaces/sales/views/private_b", replace, service=POLICY_PATH, auth=dev)
    assert answer.status_code == 200 and answer.json()["metadata"]["current-version-id"] == 2
    with pytest.raises(ForbiddenError):
        _rest(gw, "dev", "dev-password", path=POLICY_PATH).drop_view("sales.private_b")
    assert rest.view_exists("sales.private_b") and rest.view_exists("secret.v")


HOSTILE = [
    b"{", b"[]", b"\xff\xfe", b"[" * 60000, b'{"a":' * 5000 + b"1" + b"}" * 5000,
    json.dumps({"updates": [{"action": "no-such-update"}]}).encode(),
    json.dumps({"updates": [], "requirements": [{"type": "no-such-requirement"}]}).encode(),
    json.dumps({"updates": "not a list", "name": 5, "schema": [], "source": "x"}).encode(),
    b" " * (MAX_BODY + 4096),
]


def test_hostile_bodies_on_the_writing_view_routes_are_400_and_change_nothing(gw, rest, module_hms):
    view = _create(rest, "hostile.v")
    before = (_metadata_files(view.location()), rest.list_views("hostile"),
              _hms_table(module_hms, "hostile", "v").parameters["metadata_location"])
    for path in ("/v1/namespaces/hostile/views", "/v1/namespaces/hostile/views/v", "/v1/views/rename"):
        for body in HOSTILE:
            error_of(_call(gw, "POST", path, body), 400, "BadRequestException")
    assert (_metadata_files(view.location()), rest.list_views("hostile"),
            _hms_table(module_hms, "hostile", "v").parameters["metadata_location"]) == before


def test_register_view_takes_a_view_metadata_file_of_the_namespace(gw, rest, module_hms):
    _create(rest, "regv.source", "select 7")
    location = _call(gw, "GET", "/v1/namespaces/regv/views/source").json()["metadata-location"]
    assert _call(gw, "DELETE", "/v1/namespaces/regv/views/source").status_code == 204  # files kept
    response = _call(gw, "POST", "/v1/namespaces/regv/register-view", {"name": "copy", "metadata-location": location})
    assert response.status_code == 200, response.text
    assert response.json()["metadata-location"] == location
    loaded = _call(gw, "GET", "/v1/namespaces/regv/views/copy").json()
    assert loaded["metadata"]["versions"][0]["representations"][0]["sql"] == "select 7"
    hms = _hms_table(module_hms, "regv", "copy")
    assert hms.tableType == "VIRTUAL_VIEW" and hms.parameters["table_type"] == "ICEBERG-VIEW"
    assert hms.parameters["metadata_location"] == location
    # a name taken is 409 (a second view over copy's location would overlap it: 403), and the
    # file, not the gateway's, stays
    for name in ("copy",):
        error_of(_call(gw, "POST", "/v1/namespaces/regv/register-view", {"name": name, "metadata-location": location}),
                 409, "AlreadyExistsException")
    assert Path(location.removeprefix("file:")).exists()
    # another namespace's file 403; a table's metadata file is not view metadata: 400
    _create(rest, "regv_other.theirs")
    theirs = _call(gw, "GET", "/v1/namespaces/regv_other/views/theirs").json()["metadata-location"]
    error_of(_call(gw, "POST", "/v1/namespaces/regv/register-view", {"name": "x", "metadata-location": theirs}),
             403, "ForbiddenException")
    table = rest.create_table("regv.t", schema=SCHEMA)
    error_of(_call(gw, "POST", "/v1/namespaces/regv/register-view",
                   {"name": "x", "metadata-location": table.metadata_location}), 400, "BadRequestException")
    error_of(_call(gw, "POST", "/v1/namespaces/regv/register-view", {"name": "x"}), 400, "BadRequestException")
    assert sorted(v[1] for v in rest.list_views("regv")) == ["copy"]
