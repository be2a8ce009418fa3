"""The HMS method catalogue (gateway.thrift.hive_methods): one read-only rule for failover, the
tunnel, the metadata cache and the policy step, agreeing with the catalogue's own tables, and
every argument path of the tables present in the Hive 2.3 IDL."""

from __future__ import annotations

from types import SimpleNamespace

from gateway.thrift.hive_methods import (
    ALTERS,
    LISTINGS,
    NEUTRAL,
    OBJECT_LISTINGS,
    READS,
    WRITES,
    arguments,
    check_paths,
    is_read_only,
    written_objects,
)
from gateway.thrift.schema import load_schema
from gateway.upstream.metastore import idl_module


def test_read_only_methods():
    for m in ("get_all_databases", "get_table", "get_partitions_by_expr", "getStatus", "fetch_x",
              "show_locks", "partition_name_to_vals", "isPartitionMarkedForEvent", "aliveSince"):
        assert is_read_only(m)
    for m in ("create_database", "drop_table", "alter_table", "add_partitions", "lock", "heartbeat",
              "set_ugi", "shutdown", "markPartitionForEvent"):
        assert not is_read_only(m)


def test_the_rule_agrees_with_the_catalogue():
    reads = set(READS) | set(LISTINGS) | set(OBJECT_LISTINGS) | NEUTRAL
    assert [m for m in sorted(reads) if not is_read_only(m)] == []
    assert [m for m in sorted(WRITES) if is_read_only(m)] == []


def test_every_path_of_the_tables_is_in_the_idl():
    check_paths(load_schema())


# --- issue 48: the url rule's data -----------------------------------------------------------

#: Where the Hive 2.3 IDL's structs name storage: (struct, field, the path's end).
_PLACES = {("StorageDescriptor", "location"): "location", ("Database", "locationUri"): "locationUri",
           ("Table", "parameters"): "parameters.metadata_location"}


def _placing_paths(cls, prefix: str = "", depth: int = 0):
    """Every argument path of ``cls`` (a thriftpy2 struct) that places storage, through structs
    and lists of structs."""
    from gateway.thrift.schema import TType

    for field in (cls.thrift_spec or {}).values():
        kind, name = field[0], field[1]
        detail = field[2] if len(field) > 2 else None
        end = _PLACES.get((cls.__name__, name))
        if end is not None:
            yield prefix + end
            continue
        if kind == TType.LIST and isinstance(detail, tuple) and detail[0] == TType.STRUCT:
            kind, detail = TType.STRUCT, detail[1]
        if kind == TType.STRUCT and depth < 4:
            yield from _placing_paths(detail, f"{prefix}{name}.", depth + 1)


def test_every_write_declares_the_locations_its_arguments_can_set():
    """A write the policy lets through names every location its arguments carry, so none
    escapes the url rule (a method added to WRITES without them fails here)."""
    schema = load_schema()
    for name, write in WRITES.items():
        found = set(_placing_paths(schema.methods[name].args_class))
        assert found == set(write.locations), name
    assert WRITES["create_table"].locations == ("tbl.sd.location", "tbl.parameters.metadata_location")
    assert "alter_partitions" in ALTERS and "create_table" not in ALTERS


def test_arguments_fan_out_over_lists_and_enter_maps():
    idl = idl_module(load_schema())
    part = lambda db, t, where: idl.Partition(values=["1"], dbName=db, tableName=t, sd=idl.StorageDescriptor(location=where))
    args = SimpleNamespace(new_parts=[part("a", "t", "s3://b/1"), part("a", "t", None), part("A", "u", "s3://b/2")],
                           tbl=idl.Table(parameters={"metadata_location": "s3://b/m.json"}))
    assert arguments(args, "new_parts.sd.location") == ["s3://b/1", "s3://b/2"]
    assert arguments(args, "tbl.parameters.metadata_location") == ["s3://b/m.json"]
    assert arguments(args, "tbl.parameters.other") == [] and arguments(args, "nothing.at.all") == []
    # add_partitions: each partition names its table, and each is judged
    assert written_objects(WRITES["add_partitions"], args) == [("a", "t"), ("A", "u")]
    assert written_objects(WRITES["add_partitions"], SimpleNamespace(new_parts=[])) == [("", "")]
    request = SimpleNamespace(request=SimpleNamespace(dbName="a", tblName="t", parts=args.new_parts))
    assert written_objects(WRITES["add_partitions_req"], request) == [("a", "t"), ("A", "u")]
    assert written_objects(WRITES["create_database"], SimpleNamespace(database=idl.Database(name="d"))) == [("d", None)]
    assert written_objects(WRITES["alter_partition"], SimpleNamespace(
        db_name="a", tbl_name="t", new_part=idl.Partition(values=["1"]))) == [("a", "t")]  # the partition names none
