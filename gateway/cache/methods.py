"""Which HMS reads the cache keeps, which counters each depends on, and which counters a write
bumps (:mod:`gateway.cache.generations`).

Argument paths are thriftpy2 attribute paths in ``<method>_args``, as in
:mod:`gateway.thrift.hive_methods`, whose tables this module reuses; :func:`check_paths` checks
the paths this module adds against an IDL (a unit test runs it on the bundled one).

The cached reads are pure: their reply depends only on their arguments and the catalog's state
(not on the caller; the ``*_with_auth`` reads are left out). A read is cached only when every
change to its reply is logged, since the log is how a pod learns of other pods' and clients'
writes: HMS 2.x logs no event when statistics change (statistics reads are left out) and none
for ``alter_database`` (``ALTER_DATABASE`` comes with Hive 3), so ``get_database`` is left out:
the database a pod held would outlive another pod's ``alter_database`` until its TTL.
:data:`UNLOGGED_WRITES` names those writes; a unit test checks that no cached read depends on
them alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from gateway.cache.generations import DATABASES, EPOCH, database_slot, listing_slot, table_slot
from gateway.thrift.hive_methods import (
    LISTINGS,
    READS,
    WRITES,
    argument,
    check_argument_paths,
    written_objects,
)
from gateway.thrift.schema import ServiceSchema

__all__ = ["ALL", "CACHED", "NO_CATALOG_CHANGE", "Scope", "UNLOGGED_WRITES", "check_paths", "dependencies", "touched_by_event", "touched_by_write"]


class Scope(NamedTuple):
    """What a cached read depends on: ``level`` is ``"databases"`` (the database list),
    ``"listing"`` (a database's tables) or ``"table"`` (a table,
    its partitions); ``db`` and ``table`` are argument paths."""

    level: str
    db: str | None = None
    table: str | None = None


_TABLE_READS = (
    "get_table", "get_table_req", "get_fields", "get_fields_with_environment_context", "get_schema",
    "get_schema_with_environment_context", "get_partition", "get_partition_by_name", "get_partitions",
    "get_partitions_ps", "get_partitions_by_filter", "get_partitions_by_names", "get_partitions_by_expr",
    "get_partitions_pspec", "get_part_specs_by_filter", "get_partition_names", "get_partition_names_ps",
)
#: Cached read → what it depends on: the issue's ten reads and the IDL's other pure reads
#: of databases, table listings, tables and partitions (docs/operations.md lists them).
CACHED: dict[str, Scope] = {
    "get_all_databases": Scope("databases"),
    "get_databases": Scope("databases"),
    **{m: Scope("listing", LISTINGS[m]) for m in (
        "get_all_tables", "get_tables", "get_tables_by_type", "get_table_names_by_filter")},
    "get_table_objects_by_name": Scope("listing", "dbname"),
    "get_table_objects_by_name_req": Scope("listing", READS["get_table_objects_by_name_req"].db),
    **{m: Scope("table", READS[m].db, READS[m].table) for m in _TABLE_READS},
}

#: Writes HMS 2.3 logs no notification event for, and the reads whose replies they change
#: (tests/integration/test_replicas.py checks the first against a real HMS). Column statistics
#: writes also add their columns to the table's ``COLUMN_STATS_ACCURATE`` parameter: a cached
#: table read can lag that by up to its TTL, understating which statistics are accurate
#: (docs/operations.md, "Limits").
UNLOGGED_WRITES: dict[str, tuple[str, ...]] = {
    "alter_database": ("get_database",),
    **{m: ("get_table_statistics_req", "get_partitions_statistics_req", "get_table_column_statistics",
           "get_partition_column_statistics", "get_aggr_stats_for") for m in (
        "update_table_column_statistics", "update_partition_column_statistics", "set_aggr_stats_for",
        "delete_table_column_statistics", "delete_partition_column_statistics")},
}

#: Writes of partitions and statistics that :data:`~gateway.thrift.hive_methods.WRITES` does not
#: list (the policy refuses them), by the table they change.
_TABLE_WRITES: dict[str, tuple[str, str]] = {
    **{m: ("db_name", "tbl_name") for m in (
        "append_partition", "append_partition_with_environment_context", "append_partition_by_name",
        "append_partition_by_name_with_environment_context", "drop_partition_with_environment_context",
        "drop_partition_by_name_with_environment_context", "rename_partition", "markPartitionForEvent", "delete_partition_column_statistics",
        "delete_table_column_statistics")},
    "drop_partitions_req": ("req.dbName", "req.tblName"),
    "update_table_column_statistics": ("stats_obj.statsDesc.dbName", "stats_obj.statsDesc.tableName"),
    "update_partition_column_statistics": ("stats_obj.statsDesc.dbName", "stats_obj.statsDesc.tableName"),
}
#: Calls that are not reads by name but change no database, table or partition: locks,
#: transactions, the identity handshake. Any other write the tables above do not name drops
#: everything (exact, at the price of the hit rate).
NO_CATALOG_CHANGE = frozenset({
    "set_ugi", "lock", "check_lock", "unlock", "heartbeat", "heartbeat_txn_range", "open_txns",
    "abort_txn", "abort_txns", "commit_txn", "compact", "flushCache", "setMetaConf",
    "renew_delegation_token", "cancel_delegation_token", "add_token", "remove_token",
    "add_master_key", "update_master_key", "remove_master_key", "cm_recycle",
})
#: Event types that name no catalog object and change none (transactions).
_NO_CATALOG_EVENTS = frozenset({"OPEN_TXN", "COMMIT_TXN", "ABORT_TXN"})

ALL = (EPOCH,)


def _name(args, path: str | None) -> str | None:
    value = argument(args, path) if path else None
    return value if isinstance(value, str) else None


def dependencies(method: str, args) -> tuple[int, ...] | None:
    """The counter slots a reply of ``method`` (cached, ``args`` its thriftpy2 arguments) was
    filled under; None when the call names no database (then it is not cached)."""
    scope = CACHED[method]
    if scope.level == "databases":
        return EPOCH, DATABASES
    db = _name(args, scope.db)
    if db is None:
        return None
    if scope.level == "listing":
        return EPOCH, database_slot(db), listing_slot(db)
    table = _name(args, scope.table)
    if table is None:
        return None
    return EPOCH, database_slot(db), table_slot(db, table)


def _table(db: str, table: str) -> tuple[int, ...]:
    return table_slot(db, table), listing_slot(db)


def _database(db: str) -> tuple[int, ...]:
    return database_slot(db), listing_slot(db), DATABASES


def touched_by_write(method: str, args) -> tuple[int, ...]:
    """The slots a write of ``method`` with ``args`` (thriftpy2, or None when they did not
    decode) must bump: its table's or database's, or :data:`ALL` when it cannot be told."""
    if method in NO_CATALOG_CHANGE:
        return ()
    if args is None:
        return ALL
    write = WRITES.get(method)
    if write is not None:
        objects = written_objects(write, args)  # one per partition where each names its table
        if any(not db or (write.table is not None and not table) for db, table in objects):
            return ALL
        if write.table is None:
            return _database(objects[0][0])
        slots: tuple[int, ...] = ()
        for db, table in objects:
            slots += _table(db, table)  # type: ignore[arg-type]
        if write.renamed is not None:  # an alter may rename: the new name's entries too
            new_db, new_table = (_name(args, path) for path in write.renamed)
            if new_db is None or new_table is None:
                return ALL
            slots += _table(new_db, new_table)
        return slots
    paths = _TABLE_WRITES.get(method)
    if paths is not None:
        db, table = _name(args, paths[0]), _name(args, paths[1])
        return ALL if db is None or table is None else _table(db, table)
    return ALL


def touched_by_event(event_type: str, db: str | None, table: str | None,
                     message: dict) -> tuple[int, ...]:
    """The slots a notification event must bump. An ``ALTER_TABLE`` event names the table
    after the change and its message (``db``, ``table``) the table before: a rename drops both.
    An event naming no database drops everything, except transaction events."""
    if not db:
        return () if event_type in _NO_CATALOG_EVENTS else ALL
    if not table:
        return _database(db)
    slots = _table(db, table)
    before_db, before_table = message.get("db"), message.get("table")
    if isinstance(before_db, str) and isinstance(before_table, str):
        slots += _table(before_db, before_table)
    return slots


def check_paths(schema: ServiceSchema, methods: Iterable[str] | None = None) -> None:
    """Raise ``ValueError`` when ``schema``'s IDL lacks a method or an argument path this
    module names (another IDL than Hive 2.3's)."""
    wanted = {**{m: (s.db, s.table) for m, s in CACHED.items()}, **_TABLE_WRITES}
    for name in methods or wanted:
        check_argument_paths(schema, {name: wanted.get(name, ())})
