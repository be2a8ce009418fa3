"""Tables and views as one kind of catalog object (gateway/iceberg/objects.py: one lookup, drop
and load result for both), and the route table's models as what runs (routes.answer): the
request model reads the body before the handler, the response model writes the answer."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.objects import TABLE, VIEW
from gateway.iceberg.routes import ROUTES, RouteMatch, answer, route_of
from gateway.iceberg.service_state import ServiceState
from gateway.policy.view import CatalogView
from gateway.thrift.schema import load_schema
from gateway.upstream.metastore import idl_module

IDL = idl_module(load_schema())


def _hms_table(table_type: str | None, *, tableType: str = "EXTERNAL_TABLE", location: str | None = "file:/m.json"):
    parameters = {} if table_type is None else {"table_type": table_type}
    if location is not None:
        parameters["metadata_location"] = location
    return SimpleNamespace(dbName="db", tableName="t", tableType=tableType, parameters=parameters)


class _Client:
    """HMS with one database ``db`` and at most one table ``db.t``."""

    idl = IDL

    def __init__(self, table=None):
        self.table, self.calls = table, []

    async def get_database(self, name):
        if name != "db":
            raise IDL.NoSuchObjectException(message="no")
        return IDL.Database(name=name)

    async def get_table(self, db, name):
        if self.table is None or (db, name) != ("db", "t"):
            raise IDL.NoSuchObjectException(message="no")
        return self.table

    async def call(self, method, **args):
        self.calls.append(method)
        if method == "drop_table" and self.table is None:
            raise IDL.NoSuchObjectException(message="no")


def _catalog(client=None, seen=True) -> Catalog:
    view = SimpleNamespace(visible=lambda db, table=None: seen, may=lambda *a: True)
    return Catalog(client, view, None, ServiceState(), "ana")  # type: ignore[arg-type]


_VIEW_TABLE = dict(tableType="VIRTUAL_VIEW")


@pytest.mark.parametrize("kind, found, error, words", [
    (TABLE, None, errors.NoSuchTable, "Table does not exist: db.t"),
    (VIEW, None, errors.NoSuchView, "View does not exist: db.t"),
    (TABLE, _hms_table("ICEBERG-VIEW", **_VIEW_TABLE), errors.NoSuchTable, "db.t is an Iceberg view, not a table"),
    (VIEW, _hms_table("ICEBERG"), errors.NoSuchView, "db.t is an Iceberg table, not a view"),
    (TABLE, _hms_table(None), errors.NoSuchTable, "Table db.t is not an Iceberg table (table_type None)"),
    (TABLE, _hms_table("ICEBERG", location=None), errors.NoSuchTable, "is not an Iceberg table"),
    (VIEW, _hms_table("hive"), errors.NoSuchView,
     "db.t is not an Iceberg view (tableType 'EXTERNAL_TABLE', table_type 'hive')"),
    (VIEW, _hms_table("ICEBERG-VIEW", location=None, **_VIEW_TABLE), errors.NoSuchView, "is not an Iceberg view"),
])
async def test_one_lookup_answers_each_kind_s_404(kind, found, error, words):
    with pytest.raises(error) as caught:
        await _catalog(_Client(found)).lookup("db", "t", kind)
    assert type(caught.value) is error and words in caught.value.message


@pytest.mark.parametrize("kind, found", [(TABLE, _hms_table("iceberg")), (VIEW, _hms_table("iceberg-view", **_VIEW_TABLE))])
async def test_one_lookup_finds_each_kind(kind, found):
    assert await _catalog(_Client(found)).lookup("db", "t", kind) is found


async def test_a_missing_namespace_is_its_404_for_both_kinds():
    for kind in (TABLE, VIEW):
        with pytest.raises(errors.NoSuchNamespace):
            await _catalog(_Client()).lookup("other", "t", kind)


@pytest.mark.parametrize("kind, error", [(TABLE, errors.NoSuchTable), (VIEW, errors.NoSuchView)])
def test_an_object_the_user_cannot_see_is_the_kind_s_404_and_recorded_as_denied(kind, error):
    catalog = _catalog(seen=False)
    with pytest.raises(error):
        catalog.require("select", "db", "t", kind)
    assert catalog.decision == "denied"


@pytest.mark.parametrize("kind, error", [(TABLE, errors.NoSuchTable), (VIEW, errors.NoSuchView)])
async def test_one_drop_for_both_kinds(kind, error):
    client = _Client()
    with pytest.raises(error):
        await _catalog(client).drop("db", "t", kind)
    assert client.calls == ["drop_table"]


def _metadata():
    return new_table_metadata(schema=Schema(NestedField(1, "id", LongType(), required=False)),
                              partition_spec=UNPARTITIONED_PARTITION_SPEC, sort_order=UNSORTED_SORT_ORDER,
                              location="file:/wh/db.db/t", properties={})


def test_the_load_result_is_written_as_the_metadata_file_is_and_leaves_out_what_it_lacks():
    metadata = _metadata()
    row = route_of("loadTable")
    written = json.loads(row.written(Reply(body=TABLE.result("file:/m.json", metadata))).body)
    assert written == {"metadata-location": "file:/m.json", "metadata": json.loads(metadata.model_dump_json()),
                       "config": {}}
    staged = json.loads(row.written(Reply(body=TABLE.result(None, metadata))).body)
    assert "metadata-location" not in staged and "storage-credentials" not in staged
    credentials = [{"prefix": "s3://b/t/", "config": {"s3.access-key-id": "k"}}]
    vended = json.loads(row.written(Reply(body=TABLE.result("file:/m.json", metadata, {"a": "b"}, credentials))).body)
    assert vended["storage-credentials"] == credentials and vended["config"] == {"a": "b"}


def test_a_listing_writes_its_null_page_token():
    body = TABLE.list_model(identifiers=[{"namespace": ["db"], "name": "t"}])
    assert json.loads(route_of("listTables").written(Reply(body=body)).body) == {
        "identifiers": [{"name": "t", "namespace": ["db"]}], "next-page-token": None}


def test_an_answer_that_is_not_the_row_s_response_model_is_a_gateway_bug():
    with pytest.raises(TypeError, match="not its response model"):
        route_of("loadView").written(Reply(body=TABLE.result("file:/m.json", _metadata())))
    with pytest.raises(TypeError):
        route_of("dropTable").written(Reply(body={"dropped": True}))
    assert route_of("dropTable").written(Reply(status=204)) == Reply(status=204)


@pytest.mark.parametrize("operation, route", [
    ("createNamespace", RouteMatch("createNamespace")),
    ("createTable", RouteMatch("createTable", "db")),
    ("updateTable", RouteMatch("updateTable", "db", "t")),
    ("replaceView", RouteMatch("replaceView", "db", "t")),
    ("renameView", RouteMatch("renameView")),
    ("commitTransaction", RouteMatch("commitTransaction")),
    ("reportMetrics", RouteMatch("reportMetrics", "db", "t")),
    ("registerView", RouteMatch("registerView", "db")),
])
async def test_a_body_that_does_not_read_as_the_row_s_request_model_is_400_before_the_handler(operation, route):
    assert route_of(operation).request is not None
    client = _Client()
    with pytest.raises(errors.BadRequest):
        await answer(_catalog(client), route, None, b'{"updates": 7, "name": ["x"], "namespace": 3}')
    assert client.calls == []


def test_every_row_with_a_body_names_its_request_model():
    takes_body = {row.operation for row in ROUTES if row.method == "POST"}
    assert {row.operation for row in ROUTES if row.request is not None} == takes_body


def test_a_view_is_a_table_resource_to_the_policy():
    view = CatalogView(None, "ana", ())
    catalog = Catalog(None, view, None, ServiceState(), "ana")  # type: ignore[arg-type]
    catalog.require("alter", "db", "t", VIEW)
    assert catalog.decision == "allowed"
