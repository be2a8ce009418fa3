"""Issue 32's server parts without HMS: nested namespaces on reads (Java's metadata tables),
warehouses under ``{prefix}``, HMS's refusal of column changes, empty directories after drops."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import TypeAdapter, ValidationError

from gateway.iceberg import errors
from gateway.iceberg.empty_dirs import remove_empty
from gateway.iceberg.local_paths import local_path
from gateway.iceberg.hms_refusals import SETTING, commit_refusal
from gateway.iceberg.routes import match
from gateway.iceberg.warehouses import Warehouse, Warehouses, WarehouseView, config_overrides
from gateway.policy.view import CatalogView


# --- nested namespaces ---------------------------------------------------------------------------

@pytest.mark.parametrize("method, path, kind", [
    ("GET", "/v1/namespaces/ns%1Ft/tables/snapshots", errors.NoSuchTable),   # Java: ns.t.snapshots
    ("HEAD", "/v1/namespaces/ns%1Ft/tables/history", errors.NoSuchTable),
    ("GET", "/v1/namespaces/ns%1Ft/views/snapshots", errors.NoSuchView),     # tried first by Spark
    ("HEAD", "/v1/namespaces/ns%1Ft/views/snapshots", errors.NoSuchView),
    ("DELETE", "/v1/namespaces/ns%1Ft/tables/x", errors.NoSuchTable),
    ("GET", "/v1/namespaces/ns%1Ft", errors.NoSuchNamespace),
    ("HEAD", "/v1/namespaces/ns%1Ft", errors.NoSuchNamespace),
    ("GET", "/v1/namespaces/ns%1Ft/tables", errors.NoSuchNamespace),
])
def test_reading_a_nested_namespace_is_the_spec_404_java_falls_back_on(method, path, kind):
    with pytest.raises(kind) as caught:
        match(method, path)
    assert caught.value.status == 404 and "one namespace level" in caught.value.message


@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/namespaces/ns%1Ft/tables"),
    ("POST", "/v1/namespaces/ns%1Ft/tables/x"),
    ("POST", "/v1/namespaces/ns%1Ft/properties"),
])
def test_writing_into_a_nested_namespace_stays_a_clear_400(method, path):
    with pytest.raises(errors.BadRequest, match="nested namespaces are not supported"):
        match(method, path)


def test_a_dot_in_a_name_is_a_clear_400():
    with pytest.raises(errors.BadRequest, match="letters, digits"):
        match("GET", "/v1/namespaces/sales/tables/my.table")


# --- warehouses under a prefix -------------------------------------------------------------------

def test_a_catalog_route_below_a_warehouse_prefix_names_it():
    route = match("GET", "/v1/demo/namespaces/sales/tables/t", {"demo"})
    assert (route.operation, route.namespace, route.table, route.warehouse) == ("loadTable", "sales", "t", "demo")
    assert match("GET", "/v1/namespaces/sales", {"demo"}).warehouse is None


def test_an_unknown_prefix_and_a_prefixed_config_are_404():
    with pytest.raises(errors.NotFound):
        match("GET", "/v1/other/namespaces", {"demo"})
    with pytest.raises(errors.NotFound):
        match("GET", "/v1/demo/config", {"demo"})


def test_config_answers_the_prefix_of_a_known_warehouse_and_400_for_another():
    warehouses = {"demo": Warehouse(databases=["*"])}
    assert config_overrides(warehouses, None) == {}
    assert config_overrides(warehouses, "demo") == {"prefix": "demo"}
    with pytest.raises(errors.BadRequest, match="no warehouse 's3://b/wh'; its warehouses: demo"):
        config_overrides(warehouses, "s3://b/wh")


@pytest.mark.parametrize("value, words", [
    ({"namespaces": {"databases": ["*"]}}, "path segment of the API"),
    ({"a/b": {"databases": ["*"]}}, "letters, digits"),
    ({"w": {"databases": []}}, "at least 1"),
    ({"w": {"databases": ["a.b"]}}, "HMS names"),
    ({"w": {"databases": ["*"], "roots": []}}, "Extra inputs"),
])
def test_warehouse_options_are_validated_at_start(value, words):
    with pytest.raises(ValidationError, match=words):
        TypeAdapter(Warehouses).validate_python(value)


def test_below_a_prefix_only_the_warehouse_s_databases_exist():
    view = WarehouseView(CatalogView(None, "etl"), Warehouse(databases=["sales", "lake_*"]))
    assert view.visible_databases(["default", "sales", "lake_a", "LAKE_B"]) == ["sales", "lake_a", "LAKE_B"]
    assert view.hidden == 1
    assert view.visible("sales", "t") and not view.visible("default")
    assert not view.may("create", "default") and view.may("create", "lake_x")
    assert view.visible_tables("default", ["t"]) == [] and view.listing_verdict("default") is False


# --- HMS's column-type check ---------------------------------------------------------------------

def test_hms_refusing_a_column_change_is_400_naming_the_setting_not_a_retryable_409():
    message = ("The following columns have types incompatible with the existing columns in their "
               "respective positions :\nid,name")
    error = commit_refusal("db.t", message)
    assert isinstance(error, errors.BadRequest) and SETTING in error.message and "id,name" in error.message
    other = commit_refusal("db.t", "java.lang.NullPointerException at org.apache.hadoop.hive")
    assert isinstance(other, errors.CommitFailed) and "java" not in other.message


# --- empty directories ---------------------------------------------------------------------------

def test_only_empty_local_directories_at_or_below_the_location_go(tmp_path):
    table = tmp_path / "db.db" / "t"
    (table / "data" / "p=1").mkdir(parents=True)
    (table / "metadata").mkdir()
    kept = tmp_path / "db.db" / "other"
    kept.mkdir()
    assert asyncio.run(remove_empty(table.as_uri(), below=True)) == 4
    assert not table.exists() and kept.exists()
    (kept / "f").write_text("x")
    assert asyncio.run(remove_empty(kept.as_uri(), below=True)) == 0 and kept.exists()
    assert asyncio.run(remove_empty(str(tmp_path / "db.db"), below=False)) == 0  # not empty


def test_object_store_locations_have_no_directories():
    assert local_path("s3://bucket/db/t") is None and local_path("file:///w/t") == "/w/t"
    assert asyncio.run(remove_empty("s3://bucket/db/t", below=True)) == 0
