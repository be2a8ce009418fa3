"""The HMS method catalogue (gateway.thrift.hive_methods): one read-only rule for failover, the
tunnel, the metadata cache and the policy step, agreeing with the catalogue's own tables, and
every argument path of the tables present in the Hive 2.3 IDL."""

from __future__ import annotations

from gateway.thrift.hive_methods import (
    LISTINGS,
    NEUTRAL,
    OBJECT_LISTINGS,
    READS,
    WRITES,
    check_paths,
    is_read_only,
)
from gateway.thrift.schema import load_schema


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
