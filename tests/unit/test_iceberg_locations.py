"""Where the ``iceberg-rest`` service lets namespaces, tables and views live
(:mod:`gateway.iceberg.locations`), against a fake HMS holding a warehouse with Hive's layout:
``default`` at the warehouse root, ``sec_a`` and ``sec_b`` below it; and what a purge deletes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog
from gateway.iceberg.service_state import ServiceState
from gateway.iceberg.files import MetadataFiles, next_metadata_location
from gateway.iceberg.locations import (
    MAX_LENGTH,
    check_namespace,
    check_delegated, check_identity,
    check_in_place,
    check_moved,
    check_properties,
    check_references,
    check_table,
    inside,
    parse,
)
from gateway.policy import CatalogView, PolicyEngine
from gateway.policy.model import Policy, PolicyItem, ResourceSpec
from gateway.thrift.schema import load_schema
from gateway.upstream.metastore import idl_module

IDL = idl_module(load_schema())
WH = "file:///wh"


@pytest.mark.parametrize("value", [
    "", "   ", "relative/x", "file:///a/../b", "/a/./b", "/a//b", "/a/%2e%2E/b", "/a/%2fb", "/a\x00b",
    "/a\nb", "/a\\b", "x" * (MAX_LENGTH + 1), "ftp://host/x", "unknown://b/x", "file://host/x", "s3://",
    "s3:///key", "/a?b", "/a#b", "s3://user@bucket/x", "/a\ud800", 42, None,
    "abfss://c:secret@acct.dfs.core.windows.net/x", "abfss://a@b@acct.dfs.core.windows.net/x", "hdfs://u@nn/x",
    "s3://b/ns/*", "s3://b/ns/t*", "s3://b/${aws:username}/t", "/wh/a$b",
    "file://localhost/x", "file://LOCALHOST/x",  # PyArrow: the relative path localhost/x
])
def test_malformed_locations_are_400(value):
    with pytest.raises(errors.BadRequest):
        parse(value)


def test_one_form_for_each_location():
    assert parse("file:/x/y") == parse("file:///x/y") == parse("/x/y/")
    assert parse("s3a://Bucket/k") == parse("s3://bucket/k/") and str(parse("s3n://b/k/")) == "s3://b/k"
    assert str(parse("/x/y")) == "file:///x/y" and str(parse("s3://b")) == "s3://b"
    # Azure names the container before '@': the whole authority is compared
    assert str(parse("abfss://Lake@acct.dfs.core.windows.net/wh/t/")) == "abfs://lake@acct.dfs.core.windows.net/wh/t"
    assert not inside("abfss://other@acct.dfs.core.windows.net/wh/t", "abfss://lake@acct.dfs.core.windows.net/wh")


@pytest.mark.parametrize("location, root, expected", [
    ("/wh/db/t", "/wh/db", True), ("/wh/db", "/wh/db", True), ("/wh/db2/t", "/wh/db", False),
    ("/wh/db/../x", "/wh/db", False), ("s3://b/wh/x", "s3://b", True), ("s3://c/wh", "s3://b", False),
    ("file:///wh/db", "s3://wh/db", False),
])
def test_inside_at_segment_boundaries(location, root, expected):
    assert inside(location, root) is expected


def test_paths_of_a_table_lie_below_its_location_and_code_is_refused():
    check_properties(f"{WH}/a/t", {"write.data.path": f"{WH}/a/t/data2", "write.metadata.path": "/wh/a/t/m"}, "t")
    for key in ("write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path"):
        with pytest.raises(errors.Forbidden):
            check_properties(f"{WH}/a/t", {key: f"{WH}/b/t"}, "t")
        with pytest.raises(errors.BadRequest):
            check_properties(f"{WH}/a/t", {key: f"{WH}/a/t/../../b"}, "t")
    for key in ("WRITE.DATA.PATH", " write.metadata.path", "Write.Object-Storage.Path\t"):  # any case, spaces
        with pytest.raises(errors.Forbidden):
            check_properties(f"{WH}/a/t", {key: f"{WH}/b/t"}, "t")
    with pytest.raises(errors.BadRequest):
        check_properties(f"{WH}/a/t", {"py-io-impl": "subprocess.Popen"}, "t")
    with pytest.raises(errors.BadRequest):
        check_properties("", {}, "t")


# --- against HMS ------------------------------------------------------------------------------------

class FakeHMS:
    """Databases with locations, tables with locations; the warehouse as HMS tells it."""

    def __init__(self):
        self.idl = IDL
        self.databases = {"default": WH, "sec_a": f"{WH}/sec_a.db", "sec_b": f"{WH}/sec_b.db", "odd": None}
        self.tables = {("sec_a", "t"): f"{WH}/sec_a.db/t", ("sec_b", "trips"): f"{WH}/sec_b.db/trips",
                       ("default", "old"): f"{WH}/old"}
        self.calls: list[str] = []

    async def get_all_databases(self):
        self.calls.append("get_all_databases")
        return list(self.databases)

    async def get_database(self, name):
        self.calls.append("get_database")
        if name not in self.databases:
            raise IDL.NoSuchObjectException(message="no such database")
        return IDL.Database(name=name, locationUri=self.databases[name])

    async def call(self, method, **args):
        self.calls.append(method)
        if method == "get_config_value":
            return "file:/wh"
        if method == "get_all_tables":
            return [t for d, t in self.tables if d == args["db_name"]]
        if method == "get_table_objects_by_name":
            return [IDL.Table(dbName=args["dbname"], tableName=t, sd=IDL.StorageDescriptor(
                location=self.tables[(args["dbname"], t)])) for t in args["tbl_names"]]
        raise AssertionError(method)


def _url_policy(values, recursive=True, users=("alice",)):
    return Policy(id=9, name="alice places tables", resources=(), url=ResourceSpec(tuple(values), recursive=recursive),
                  allow=(PolicyItem(frozenset({"read", "write"}), frozenset(users)),))


def _catalog(user="alice", urls=(), allowed=()) -> tuple[Catalog, FakeHMS]:
    everything = Policy(id=1, name="all", resources=(ResourceSpec(("*",)), ResourceSpec(("*",))),
                        allow=(PolicyItem(frozenset({"create", "select"}), frozenset({"alice", "bob"})),))
    engine = PolicyEngine([everything, *([_url_policy(urls)] if urls else [])])
    hms = FakeHMS()
    service = ServiceState(allowed_locations=tuple(allowed))
    return Catalog(hms, CatalogView(engine, user), MetadataFiles(), service, user), hms


def _run(coro):
    return asyncio.run(coro)


def _db(hms: FakeHMS, name: str):
    return IDL.Database(name=name, locationUri=hms.databases[name])


def test_a_table_at_its_default_location_needs_no_url_permission_and_lists_only_its_namespace():
    catalog, hms = _catalog()
    assert str(_run(check_table(catalog, "sec_a", "new", f"{WH}/sec_a.db/new", _db(hms, "sec_a")))) == "file:///wh/sec_a.db/new"
    assert "get_all_databases" not in hms.calls  # no namespace listing for a default location


@pytest.mark.parametrize("location, error", [
    (f"{WH}/sec_b.db/trips", errors.Forbidden),              # another namespace's table
    (f"{WH}/sec_b.db/new", errors.Forbidden),                # outside its namespace
    (f"{WH}/sec_a.db", errors.Forbidden),                    # the namespace itself
    (f"{WH}/sec_a.db/t", errors.Forbidden),                  # a sibling's location
    (f"{WH}/sec_a.db/t/inner", errors.Forbidden),            # inside a sibling
    ("file:///etc/x", errors.Forbidden),                     # outside the allowed locations
    (f"{WH}/sec_a.db/../sec_b.db/trips", errors.BadRequest),
    ("", errors.BadRequest),
])
def test_table_locations_are_confined(location, error):
    catalog, hms = _catalog(urls=["/"])
    with pytest.raises(error):
        _run(check_table(catalog, "sec_a", "new", location, _db(hms, "sec_a")))


def test_a_chosen_location_needs_the_url_permission():
    chosen = f"{WH}/sec_a.db/elsewhere"
    catalog, hms = _catalog()
    with pytest.raises(errors.Forbidden, match="url permission"):
        _run(check_table(catalog, "sec_a", "new", chosen, _db(hms, "sec_a")))
    catalog, hms = _catalog(urls=[f"{WH}/sec_a.db"])
    _run(check_table(catalog, "sec_a", "new", chosen, _db(hms, "sec_a")))
    catalog, hms = _catalog(urls=[f"{WH}/sec_b.db"])
    with pytest.raises(errors.Forbidden):
        _run(check_table(catalog, "sec_a", "new", chosen, _db(hms, "sec_a")))


def test_a_table_of_default_may_not_cover_another_namespace():
    catalog, hms = _catalog(urls=["/"])
    with pytest.raises(errors.Forbidden, match="namespace sec_b"):
        _run(check_table(catalog, "default", "sec_b", f"{WH}/sec_b.db", _db(hms, "default")))
    _run(check_table(catalog, "default", "fresh", f"{WH}/fresh", _db(hms, "default")))


def test_a_namespace_may_not_overlap_another_but_may_sit_in_the_warehouse_root():
    catalog, hms = _catalog(urls=["/"])
    for location in (f"{WH}/sec_b.db", f"{WH}/sec_b.db/x", WH + "/sec_a.db/..", "file:///elsewhere", f"{WH}/old"):
        with pytest.raises((errors.Forbidden, errors.BadRequest)):
            _run(check_namespace(catalog, "mine", location))
    _run(check_namespace(catalog, "mine", f"{WH}/mine_here"))
    _run(check_namespace(catalog, "sec_b", f"{WH}/sec_b.db"))  # its own location, unchanged
    # HMS's own choice for a new namespace is checked for overlaps too
    hms.tables[("default", "clash")] = f"{WH}/clash.db"
    with pytest.raises(errors.Forbidden):
        _run(check_namespace(catalog, "clash", None))


def test_a_re_pointed_namespace_is_refused_without_naming_what_the_user_cannot_see():
    catalog, _ = _catalog(user="alice", urls=["/"])
    catalog.view = CatalogView(PolicyEngine([_url_policy(["/"])]), "alice")  # alice sees nothing
    with pytest.raises(errors.Forbidden) as refused:
        _run(check_namespace(catalog, "alice_ns", f"{WH}/sec_b.db"))
    assert "sec_b" not in refused.value.message.replace(f"{WH}/sec_b.db", "")


def test_allowed_locations_widen_the_warehouse():
    catalog, hms = _catalog(urls=["s3://lake"], allowed=["s3://lake/"])
    hms.databases["s3ns"] = "s3://lake/ns"
    _run(check_table(catalog, "s3ns", "t", "s3a://lake/ns/t", _db(hms, "s3ns")))
    with pytest.raises(errors.Forbidden):
        _run(check_namespace(catalog, "other", "s3://elsewhere/ns"))


# --- purge ----------------------------------------------------------------------------------------

def test_purge_deletes_only_files_below_the_table_location(tmp_path: Path, caplog):
    table, other = tmp_path / "wh" / "a" / "t", tmp_path / "wh" / "b" / "u"
    for directory in (table / "metadata", other / "metadata"):
        directory.mkdir(parents=True)
    mine, theirs = table / "metadata" / "stats.puffin", other / "metadata" / "stats.puffin"
    old, foreign_list = table / "metadata" / "00000-old.metadata.json", other / "metadata" / "snap-1.avro"
    for path in (mine, theirs, old, foreign_list):
        path.write_bytes(b"x")
    metadata = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                                  UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, table.as_uri())
    stats = [{"snapshot-id": 1, "statistics-path": p.as_uri(), "file-size-in-bytes": 1,
              "file-footer-size-in-bytes": 1, "blob-metadata": []} for p in (mine, theirs)]
    snapshot = {"snapshot-id": 1, "sequence-number": 1, "timestamp-ms": 1, "manifest-list": foreign_list.as_uri(),
                "summary": {"operation": "append"}, "schema-id": 0}
    metadata = type(metadata).model_validate({
        **metadata.model_dump(by_alias=True), "statistics": stats, "snapshots": [snapshot],
        "metadata-log": [{"metadata-file": old.as_uri(), "timestamp-ms": 1},
                         {"metadata-file": theirs.as_uri(), "timestamp-ms": 2}]})
    files = MetadataFiles()
    current = next_metadata_location(metadata, None)
    asyncio.run(files.write(metadata, current))
    with caplog.at_level("WARNING"):
        deleted = asyncio.run(files.purge(metadata, current, "a.t"))
    assert deleted == 3 and not mine.exists() and not old.exists()
    assert theirs.exists() and foreign_list.exists()
    skipped = [r.getMessage() for r in caplog.records if "skips" in r.getMessage()]
    assert any(str(foreign_list) in line for line in skipped) and any(str(theirs) in line for line in skipped)


def test_the_metadata_file_name_ignores_a_location_provider_property():
    metadata = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                                  UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, f"{WH}/a/t",
                                  properties={"write.py-location-provider.impl": "shutil.rmtree",
                                              "write.metadata.path": f"{WH}/a/t/meta"})
    assert next_metadata_location(metadata, None).startswith(f"{WH}/a/t/meta/00000-")


# --- tables already there: commits, delegated access, purge --------------------------------------

def test_an_s3_session_policy_never_sees_a_wildcard_from_a_location():
    """IAM reads ``*`` in a session policy's resource as a wildcard: a table at ``s3://b/ns/*``
    would be vended every table of the namespace. Such a location is refused before any policy."""
    from demo.moto_iam import permits  # the demo's S3 server's IAM evaluation
    from gateway.iceberg.vending import session_policy
    sibling = "arn:aws:s3:::b/ns/other/data/x.parquet"
    assert permits(session_policy("s3://b/ns/*", False), "s3:GetObject", sibling, {})  # why parse refuses '*'
    for location in ("s3://b/ns/*", "s3://b/n*/t"):
        with pytest.raises(errors.BadRequest):
            parse(location)


def test_a_table_placed_by_other_means_gets_no_commit_credentials_or_signatures():
    """A table whose location the gateway would not have given it (a Thrift create_table over
    another namespace's table, a table renamed out of its namespace, one over a sibling): no
    commit writes there, no credentials or signatures are made for it, no purge."""
    catalog, hms = _catalog()
    hms.tables[("sec_a", "sibling")] = f"{WH}/sec_a.db/t/inner"
    for db, name, location in (("sec_a", "forged", f"{WH}/sec_b.db/trips"),  # another namespace's table
                               ("sec_a", "moved", f"{WH}/old_ns.db/moved"),  # renamed in
                               ("sec_a", "t", f"{WH}/sec_a.db/t")):  # over its sibling
        for doing in (check_delegated(catalog, db, name, location),
                      check_in_place(catalog, db, name, location, "purge")):
            with pytest.raises(errors.Forbidden) as refused:
                _run(doing)
            assert "sec_b" not in refused.value.message
    metadata = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                                  UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, f"{WH}/sec_b.db/trips")
    changed = metadata.model_copy(update={"properties": {"k": "v"}})
    with pytest.raises(errors.Forbidden):
        _run(check_moved(catalog, "sec_a", "forged", metadata, changed))
    # a table where the gateway would have put it: commits list nothing, delegation checks overlaps
    del hms.tables[("sec_a", "sibling")]
    hms.calls.clear()
    own = metadata.model_copy(update={"location": f"{WH}/sec_a.db/t"})
    _run(check_moved(catalog, "sec_a", "t", own, own.model_copy(update={"properties": {"k": "v"}})))
    assert hms.calls == ["get_database"]
    _run(check_delegated(catalog, "sec_a", "t", f"{WH}/sec_a.db/t"))
    for _ in range(2):  # the signer's: a verdict remembered, not asked of HMS for every request
        _run(check_delegated(catalog, "sec_a", "t", f"{WH}/sec_a.db/t", remember=60))
    hms.calls.clear()
    _run(check_delegated(catalog, "sec_a", "t", f"{WH}/sec_a.db/t", remember=60))
    assert hms.calls == []
    with pytest.raises(errors.Forbidden):  # a refusal is never remembered as fine
        _run(check_delegated(catalog, "sec_a", "forged", f"{WH}/sec_b.db/trips", remember=60))
    with pytest.raises(errors.Forbidden):
        _run(check_delegated(catalog, "sec_a", "t", "s3://bucket"))  # a bucket root


def _hive(location: str, metadata_file: str):
    return IDL.Table(sd=IDL.StorageDescriptor(location=location), parameters={"metadata_location": metadata_file})


def test_the_storage_identity_serves_a_table_only_as_itself():
    """Issue 48: an HMS table whose metadata file is another table's, or whose location lies over
    another table's, is refused naming the rule and not the other table; a table renamed out of
    its namespace is served when nothing overlaps it; a verdict found fine is remembered, a
    refusal never."""
    catalog, hms = _catalog()
    hms.tables[("sec_a", "alias")] = f"{WH}/sec_a.db/alias"
    trips_file = f"{WH}/sec_b.db/trips/metadata/00001-x.metadata.json"
    for db, name, hive in (
            ("sec_a", "alias", _hive(f"{WH}/sec_a.db/alias", trips_file)),  # another table's metadata file
            ("sec_a", "alias", _hive(f"{WH}/sec_b.db/trips", trips_file)),  # and its location too
            ("sec_a", "alias", _hive(f"{WH}/sec_b.db/trips/x", f"{WH}/sec_b.db/trips/x/m.json")),  # inside it
            ("sec_a", "alias", _hive(f"{WH}/sec_b.db", f"{WH}/sec_b.db/m.json")),  # over a namespace
            ("sec_a", "alias", _hive("s3://elsewhere/t", "s3://elsewhere/t/m.json")),  # outside the allowed
            ("sec_a", "t", _hive(f"{WH}/sec_a.db/t", f"{WH}/sec_a.db/t"))):  # the file is the location
        with pytest.raises(errors.Forbidden) as refused:
            _run(check_identity(catalog, db, name, hive))
        assert "storage-identity rule" in refused.value.message and "sec_b" not in refused.value.message
        assert "trips" not in refused.value.message
    hms.calls.clear()
    own = _hive(f"{WH}/sec_a.db/t", f"{WH}/sec_a.db/t/metadata/00001-x.metadata.json")
    _run(check_identity(catalog, "sec_a", "t", own))
    assert "get_all_tables" in hms.calls  # its siblings were compared
    hms.calls.clear()
    _run(check_identity(catalog, "sec_a", "t", own))
    assert hms.calls == []  # remembered
    with pytest.raises(errors.Forbidden):  # the file is checked every time, without HMS
        _run(check_identity(catalog, "sec_a", "t", _hive(f"{WH}/sec_a.db/t", trips_file)))
    assert hms.calls == []
    # renamed out of its namespace (its old folder now in sec_b's): served while nothing overlaps
    moved = _hive(f"{WH}/sec_b.db/gone", f"{WH}/sec_b.db/gone/metadata/1.metadata.json")
    _run(check_identity(catalog, "sec_a", "moved", moved))
    hms.tables[("sec_b", "gone")] = f"{WH}/sec_b.db/gone"  # a new table of its old name
    with pytest.raises(errors.Forbidden):
        _run(check_identity(catalog, "sec_a", "moved", moved, remember=0))


def test_a_symbolic_link_below_a_table_location_leads_nowhere(tmp_path: Path):
    """Local paths are literal (``%62`` is not ``b``, as PyArrow and HMS read them), and a file
    reached through a link at or below the table's folder is outside it."""
    from gateway.iceberg.local_paths import linked, local_path
    assert local_path("file:///wh/sec_%62.db") == "/wh/sec_%62.db"
    table, elsewhere = tmp_path / "a" / "t", tmp_path / "b"
    (table / "data").mkdir(parents=True)
    elsewhere.mkdir()
    (table / "data" / "link").symlink_to(elsewhere, target_is_directory=True)
    root = table.as_uri()
    assert linked(f"{root}/data/link/x.parquet", root) and linked(f"{root}/data/link/deeper/x", root)
    assert linked(f"{root}/data/link", root)  # the file itself a link
    assert not linked(f"{root}/data/x.parquet", root) and not linked(f"{root}/data", root)
    assert not linked("s3://b/t/data/x", "s3://b/t")
    moved = tmp_path / "a" / "moved"
    moved.symlink_to(elsewhere, target_is_directory=True)  # the table's folder itself
    assert linked(f"{moved.as_uri()}/metadata/v.json", moved.as_uri())
    # below an allowed location, a link anywhere counts: a namespace's folder too
    from gateway.iceberg.local_paths import anchor
    namespace = tmp_path / "a" / "ns.db"
    namespace.symlink_to(elsewhere, target_is_directory=True)
    assert not linked(f"{namespace.as_uri()}/t/metadata/v.json", f"{namespace.as_uri()}/t")  # not known yet
    anchor(tmp_path.as_uri())
    assert linked(f"{namespace.as_uri()}/t/metadata/v.json", f"{namespace.as_uri()}/t")
    assert not linked(f"{root}/data/x.parquet", root)


def test_a_namespace_holding_tables_cannot_move():
    """HMS 3 and later change a database's location, not its tables': they would be left
    outside their namespace, where another namespace could be placed over them."""
    from gateway.iceberg.bodies import UpdateNamespaceProperties
    from gateway.iceberg.namespaces import update_properties
    from gateway.iceberg.paths import RouteMatch
    catalog, hms = _catalog(urls=["/"])
    catalog.view = CatalogView(PolicyEngine([_url_policy(["/"]), Policy(
        id=2, name="alter", resources=(ResourceSpec(("*",)),), allow=(PolicyItem(frozenset({"alter"}), frozenset({"alice"})),))]),
        "alice")
    ask = UpdateNamespaceProperties(removals=[], updates={"location": f"{WH}/sec_a_moved"})
    with pytest.raises(errors.Forbidden) as refused:
        _run(update_properties(catalog, RouteMatch("updateProperties", "sec_a"), None, ask))
    assert "holds tables" in refused.value.message and "alter_database" not in hms.calls


def test_empty_folders_are_not_removed_through_a_link(tmp_path: Path):
    from gateway.iceberg.empty_dirs import remove_empty
    from gateway.iceberg.local_paths import anchor
    theirs = tmp_path / "wh" / "b.db" / "t"
    (theirs / "data").mkdir(parents=True)
    (tmp_path / "wh" / "a.db").symlink_to(tmp_path / "wh" / "b.db", target_is_directory=True)
    anchor((tmp_path / "wh").as_uri())
    assert asyncio.run(remove_empty((tmp_path / "wh" / "a.db" / "t").as_uri(), below=True)) == 0
    assert (theirs / "data").is_dir()
    assert asyncio.run(remove_empty(theirs.as_uri(), below=True)) == 2  # its own: data/ and itself


def test_a_fifo_or_a_device_is_never_read_as_metadata(tmp_path: Path):
    """A client of a local warehouse can make a FIFO where register (or a purge) would read:
    the reading thread would wait forever. Devices (``/dev/zero``) never end either."""
    import os

    from gateway.iceberg import files as files_module
    fifo = tmp_path / "t" / "metadata" / "00000-x.metadata.json"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    reader = MetadataFiles()
    for location in (fifo.as_uri(), "file:///dev/zero"):
        with pytest.raises(OSError, match="not a regular file"):
            asyncio.run(reader.read(location))
        with pytest.raises(OSError, match="not a regular file"):
            asyncio.run(reader.read_view(location))
    big = tmp_path / "t" / "metadata" / "00001-y.metadata.json"
    with big.open("wb") as out:
        out.truncate(files_module.MAX_METADATA_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(ValueError, match="larger than"):
        asyncio.run(reader.read(big.as_uri()))



# --- files a commit adds (issue 39) ---------------------------------------------------------------

def _updated(*updates: dict):
    """A table at ``WH/a/t`` after PyIceberg applies ``updates`` (the REST spec's JSON)."""
    from pyiceberg.table.update import TableUpdate
    from pydantic import TypeAdapter
    from pyiceberg.table.update import update_table_metadata

    base = new_table_metadata(Schema(NestedField(1, "id", LongType(), required=False)),
                              UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, f"{WH}/a/t")
    parsed = [TypeAdapter(TableUpdate).validate_python(u) for u in updates]
    return base, update_table_metadata(base, tuple(parsed))


def _snapshot(manifest_list: str) -> dict:
    return {"action": "add-snapshot", "snapshot": {
        "snapshot-id": 1, "sequence-number": 1, "timestamp-ms": 1, "schema-id": 0,
        "manifest-list": manifest_list, "summary": {"operation": "append"}}}


def _statistics(path: str) -> dict:
    return {"action": "set-statistics", "snapshot-id": 1, "statistics": {
        "snapshot-id": 1, "statistics-path": path, "file-size-in-bytes": 1, "file-footer-size-in-bytes": 1,
        "blob-metadata": []}}


def _partition_statistics(path: str) -> dict:
    return {"action": "set-partition-statistics", "partition-statistics": {
        "snapshot-id": 1, "statistics-path": path, "file-size-in-bytes": 1}}


@pytest.mark.parametrize("update,named", [
    (_snapshot, "add-snapshot manifest-list"),
    (_statistics, "set-statistics statistics-path"),
    (_partition_statistics, "set-partition-statistics statistics-path"),
])
def test_a_commit_naming_another_tables_file_is_refused(update, named):
    own = [_snapshot(f"{WH}/a/t/metadata/snap-1.avro")] if update is not _snapshot else []
    base, new = _updated(*own, update(f"{WH}/a/t/metadata/x.avro"))
    check_references(base, new)  # below the table: fine
    for elsewhere in (f"{WH}/a/u/metadata/x.avro", f"{WH}/a/t2/x.avro", "s3://other/t/x.avro", f"{WH}/a"):
        base, new = _updated(*own, update(elsewhere))
        with pytest.raises(errors.Forbidden) as refused:
            check_references(base, new)
        assert refused.value.message.startswith(f"{named} {elsewhere} is not below the table location")
    base, new = _updated(*own, update(f"{WH}/a/t/../u/x.avro"))
    with pytest.raises(errors.BadRequest):
        check_references(base, new)


def test_files_the_table_already_refers_to_are_not_judged_again():
    # a table registered or committed before the rule keeps working: only what a commit adds counts
    base, new = _updated(_snapshot(f"{WH}/a/u/snap.avro"))
    check_references(None, base)  # no snapshot yet
    with pytest.raises(errors.Forbidden):
        check_references(base, new)
    check_references(new, new)
