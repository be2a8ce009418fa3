"""View updates and requirements (:mod:`gateway.iceberg.view_updates`) on PyIceberg's
``ViewMetadata``, with the semantics of Java's ``ViewMetadata.Builder``; view metadata file
names and gzip files (:mod:`gateway.iceberg.files`)."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import ViewMetadata

from gateway.iceberg import errors
from gateway.iceberg.bodies import parse
from gateway.iceberg.files import MetadataFiles, next_view_metadata_location
from gateway.iceberg.view_updates import (
    CommitViewRequest,
    CreateViewRequest,
    InvalidViewUpdate,
    RequirementFailed,
    apply,
    new_view,
)

SCHEMA = {"type": "struct", "schema-id": 7, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
WIDER = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False},
                                                      {"id": 2, "name": "name", "type": "string", "required": False}]}


def _version(sql: str, dialect: str = "spark", schema_id: int = -1, version_id: int = 1, ts: int = 1000) -> dict:
    return {"version-id": version_id, "timestamp-ms": ts, "schema-id": schema_id, "summary": {"engine": "e"},
            "representations": [{"type": "sql", "sql": sql, "dialect": dialect}], "default-namespace": ["db"]}


def _created(properties: dict | None = None, representations: list | None = None) -> ViewMetadata:
    version = _version("select 1", schema_id=99, version_id=42)
    if representations is not None:
        version["representations"] = representations
    request = CreateViewRequest.model_validate({"name": "v", "schema": SCHEMA, "view-version": version,
                                                "properties": properties or {"comment": "c"}})
    return new_view(request, "file:///wh/db/v")


def _commit(base: ViewMetadata, updates: list, requirements: list | None = None) -> ViewMetadata | None:
    request = CommitViewRequest.model_validate({"updates": updates, "requirements": requirements or []})
    return apply(base, request.requirements, request.updates)


def _replace(base: ViewMetadata, sql: str, dialect: str = "spark", schema: dict | None = None, ts: int = 2000):
    """What Java's client sends for a replace: the schema only when new (then ``schema-id`` -1)."""
    current = next(v for v in base.versions if v.version_id == base.current_version_id)
    added = [{"action": "add-schema", "schema": schema}] if schema else []
    version = _version(sql, dialect, schema_id=-1 if schema else current.schema_id, ts=ts)
    return _commit(base, [*added, {"action": "add-view-version", "view-version": version},
                          {"action": "set-current-view-version", "view-version-id": -1}])


def test_a_new_view_is_version_1_on_schema_0_with_its_log_entry():
    view = _created()
    assert view.format_version == 1 and view.location == "file:///wh/db/v" and view.properties == {"comment": "c"}
    assert [s.schema_id for s in view.schemas] == [0]
    assert view.current_version_id == 1 and [v.version_id for v in view.versions] == [1]
    assert view.versions[0].schema_id == 0 and view.versions[0].timestamp_ms == 1000
    assert [(e.version_id, e.timestamp_ms) for e in view.version_log] == [(1, 1000)]
    assert len(view.view_uuid) == 36 and _created().view_uuid != view.view_uuid


def test_a_replace_adds_a_version_and_reuses_an_equal_schema():
    view = _replace(_created(), "select 2")
    assert [s.schema_id for s in view.schemas] == [0]
    assert view.current_version_id == 2 and view.versions[-1].schema_id == 0
    assert [(e.version_id, e.timestamp_ms) for e in view.version_log] == [(1, 1000), (2, 2000)]
    wider = _replace(view, "select 3", schema=WIDER)
    assert [s.schema_id for s in wider.schemas] == [0, 1] and wider.versions[-1].schema_id == 1
    assert wider.schemas[1] == Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
    same = _commit(wider, [{"action": "add-schema", "schema": SCHEMA}])
    assert same is None  # an equal schema is reused: nothing added
    # ... so it is not "last added" either (Java's builder): -1 then has nothing to point at
    with pytest.raises(InvalidViewUpdate, match="no schema has been added"):
        _commit(wider, [{"action": "add-schema", "schema": SCHEMA},
                        {"action": "add-view-version", "view-version": _version("select 4")}])


def test_an_equal_version_is_reused_and_making_it_current_again_is_logged_now():
    view = _replace(_created(), "select 2")
    back = _commit(view, [{"action": "add-view-version", "view-version": _version("select 1", schema_id=0)},
                          {"action": "set-current-view-version", "view-version-id": 1}])
    assert [v.version_id for v in back.versions] == [1, 2] and back.current_version_id == 1
    assert back.version_log[-1].version_id == 1 and back.version_log[-1].timestamp_ms > 2000
    # a version that exists is not "added": -1 has nothing to point at
    with pytest.raises(InvalidViewUpdate, match="no current version id has been set"):
        _commit(view, [{"action": "add-view-version", "view-version": _version("select 2", schema_id=0)},
                       {"action": "set-current-view-version", "view-version-id": -1}])


def test_nothing_changed_is_none():
    view = _created()
    assert _commit(view, []) is None
    assert _commit(view, [{"action": "set-current-view-version", "view-version-id": 1},
                          {"action": "upgrade-format-version", "format-version": 1},
                          {"action": "assign-uuid", "uuid": view.view_uuid},
                          {"action": "set-location", "location": view.location}]) is None


@pytest.mark.parametrize("updates, words", [
    ([{"action": "set-current-view-version", "view-version-id": -1}], "no current version id"),
    ([{"action": "set-current-view-version", "view-version-id": 9}], "unknown version: 9"),
    ([{"action": "add-view-version", "view-version": _version("x", schema_id=5)}], "unknown schema: 5"),
    ([{"action": "add-view-version", "view-version": _version("x", schema_id=-1)}], "no schema has been added"),
    ([{"action": "assign-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}], "Cannot reassign uuid"),
    ([{"action": "upgrade-format-version", "format-version": 2}], "Unsupported format version: 2"),
    ([{"action": "upgrade-format-version", "format-version": 0}], "Cannot downgrade"),
    ([{"action": "set-properties", "updates": {"version.history.num-entries": "0"}}], "must be positive"),
    ([{"action": "set-properties", "updates": {"version.history.num-entries": "x"}}], "must be an integer"),
    ([{"action": "set-properties", "updates": {"replace.drop-dialect.allowed": "true",
                                               "replace.append-dialect.allowed": "true"}}], "Cannot set both"),
])
def test_invalid_updates_are_refused(updates, words):
    with pytest.raises(InvalidViewUpdate, match=words):
        _commit(_created(), updates)


def test_one_sql_per_dialect_and_no_dialect_lost_unless_allowed():
    two = [{"type": "sql", "sql": "select 1", "dialect": "spark"}, {"type": "sql", "sql": "select 1", "dialect": "trino"}]
    view = _created(representations=two)
    version = _version("select 2", schema_id=0)
    version["representations"] = [{"type": "sql", "sql": "a", "dialect": "Spark"}, {"type": "sql", "sql": "b", "dialect": "spark"}]
    with pytest.raises(InvalidViewUpdate, match="multiple queries for dialect spark"):
        _commit(view, [{"action": "add-view-version", "view-version": version}])
    with pytest.raises(InvalidViewUpdate, match="loss of view dialects.*trino"):
        _replace(view, "select 2")
    allowed = _commit(view, [{"action": "set-properties", "updates": {"replace.drop-dialect.allowed": "true"}}])
    assert _replace(allowed, "select 2").current_version_id == 2


def test_properties_set_and_removed():
    view = _commit(_created(), [{"action": "set-properties", "updates": {"a": "1", "b": "2"}},
                                {"action": "remove-properties", "removals": ["b", "comment", "absent"]}])
    assert view.properties == {"a": "1"}


def test_old_versions_expire_beyond_the_history_size_keeping_the_current_one():
    view = _created({"version.history.num-entries": "2"})
    for i in range(2, 5):
        view = _replace(view, f"select {i}", ts=1000 * i)
    assert [v.version_id for v in view.versions] == [4, 3] and view.current_version_id == 4
    assert [e.version_id for e in view.version_log] == [3, 4]


def test_assert_view_uuid():
    view = _created()
    update = [{"action": "set-properties", "updates": {"x": "y"}}]
    assert _commit(view, update, [{"type": "assert-view-uuid", "uuid": view.view_uuid.upper()}]).properties["x"] == "y"
    with pytest.raises(RequirementFailed, match="view UUID does not match"):
        _commit(view, update, [{"type": "assert-view-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}])


@pytest.mark.parametrize("body", [
    {"updates": [{"action": "add-snapshot", "snapshot": {}}]},
    {"updates": [{"action": "no-such-update"}]},
    {"updates": [], "requirements": [{"type": "assert-table-uuid", "uuid": "x"}]},
    {"updates": [{"action": "set-properties", "updates": {"a": None}}]},
    {"requirements": []},
    {"updates": [{"action": "add-view-version", "view-version": {"version-id": 1}}]},
])
def test_unknown_or_malformed_updates_and_requirements_do_not_parse(body):
    with pytest.raises(errors.BadRequest):
        parse(CommitViewRequest, json.dumps(body).encode())


def test_metadata_file_names_follow_java_s_base_view_operations():
    view = _created()
    first = next_view_metadata_location(view, None)
    assert first.startswith("file:///wh/db/v/metadata/00000-") and first.endswith(".gz.metadata.json")
    second = next_view_metadata_location(view, first)
    assert second.rsplit("/", 1)[1].startswith("00001-") and second != first
    plain = _commit(view, [{"action": "set-properties", "updates": {"write.metadata.compression-codec": "none",
                                                                     "write.metadata.path": "file:///elsewhere/"}}])
    location = next_view_metadata_location(plain, "file:///x/metadata/00041-u.gz.metadata.json")
    assert location.startswith("file:///elsewhere/00042-") and location.endswith("-" + location.split("-", 1)[1])
    assert location.endswith(".metadata.json") and not location.endswith(".gz.metadata.json")
    assert next_view_metadata_location(view, "file:///x/metadata/v3.metadata.json").rsplit("/", 1)[1].startswith("00000-")
    odd = _commit(view, [{"action": "set-properties", "updates": {"write.metadata.compression-codec": "zstd"}}])
    with pytest.raises(ValueError, match="compression-codec"):
        next_view_metadata_location(odd, None)


def test_view_files_are_written_gzip_and_read_back(tmp_path):
    view = _created().model_copy(update={"location": tmp_path.as_uri()})  # written below its location
    location = next_view_metadata_location(view, None)
    files = MetadataFiles()
    asyncio.run(files.write_view(view, location))
    written = tmp_path / "metadata" / location.rsplit("/", 1)[1]
    assert json.loads(gzip.decompress(written.read_bytes()))["view-uuid"] == view.view_uuid
    assert asyncio.run(files.read_view(location)) == view
    with pytest.raises(FileExistsError):
        asyncio.run(files.write_view(view, location))
