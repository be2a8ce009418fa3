"""The catalogue of Hive Metastore Thrift methods: which argument of which method names which
database, table and column, and what each method needs (the job Apache Ranger's Hive agent does
in ``RangerHiveAuthorizer``, which maps each Hive operation to its resources and access type) for
the methods of the Hive 2.3 IDL, and which methods only read (:func:`is_read_only`). The
catalog-policy step (:mod:`gateway.hms_thrift.steps.catalog_policy`) enforces these tables
(docs/security.md lists them), the metadata cache reuses them (:mod:`gateway.cache.methods`),
and the upstream layer retries only what :func:`is_read_only` allows.

Argument paths are attribute paths in thriftpy2's ``<method>_args`` (``"req.dbName"``);
:func:`check_paths` verifies every one against an IDL when a step is built.
"""

from __future__ import annotations

from typing import NamedTuple

from .schema import ServiceSchema


class Read(NamedTuple):
    """A read naming one object: argument paths of its database and table (None: the call
    names a database only), how HMS 2.3 answers when it is missing (a key of
    :data:`gateway.thrift.refusals.MISSING`, or ``"empty"``/``"internal_error"``), whether the
    reply carries columns, and the argument naming a column (statistics)."""

    db: str
    table: str | None
    missing: str
    columns: bool = False
    column: str | None = None


_T = ("db_name", "tbl_name")
#: Every read naming one object (measured against HMS 2.3.10 for a missing database and table).
READS: dict[str, Read] = {
    "get_database": Read("name", None, "no_such_database"),
    "get_function": Read("dbName", None, "no_such_function"),
    "get_functions": Read("dbName", None, "empty"),
    "get_table": Read("dbname", "tbl_name", "no_such_table", True),
    "get_table_req": Read("req.dbName", "req.tblName", "no_such_table", True),
    **{m: Read("db_name", "table_name", "unknown_table", True) for m in (
        "get_fields", "get_fields_with_environment_context", "get_schema", "get_schema_with_environment_context")},
    **{m: Read(*_T, "no_such_table", True) for m in (
        "get_partition", "get_partition_with_auth", "get_partition_by_name", "get_partitions",
        "get_partitions_pspec", "get_partitions_ps", "get_partitions_ps_with_auth", "get_partitions_by_filter",
        "get_part_specs_by_filter", "get_partitions_by_names")},
    "get_partitions_by_expr": Read("req.dbName", "req.tblName", "no_such_table", True),
    "get_partitions_with_auth": Read(*_T, "empty", True),
    "get_partition_names": Read(*_T, "internal_error"),
    "get_partition_names_ps": Read(*_T, "no_such_table"),
    "isPartitionMarkedForEvent": Read(*_T, "unknown_table_event"),
    "get_index_by_name": Read(*_T, "no_such_index", True),
    "get_indexes": Read(*_T, "empty", True),
    "get_index_names": Read(*_T, "empty"),
    "get_primary_keys": Read("request.db_name", "request.tbl_name", "empty", True),
    "get_foreign_keys": Read("request.parent_db_name", "request.parent_tbl_name", "empty", True),
    "get_table_column_statistics": Read(*_T, "no_such_db_table", True, "col_name"),
    "get_partition_column_statistics": Read(*_T, "no_such_db_table", True, "col_name"),
    "get_table_statistics_req": Read("request.dbName", "request.tblName", "no_such_db_table", True),
    "get_partitions_statistics_req": Read("request.dbName", "request.tblName", "no_such_db_table", True),
    "get_aggr_stats_for": Read("request.dbName", "request.tblName", "no_such_db_table", True),
    "get_table_objects_by_name_req": Read("req.dbName", None, "unknown_database", True),
}
#: Reads naming a second table (database and table argument paths): both must be visible.
SECOND_TABLE = {"get_foreign_keys": ("request.foreign_db_name", "request.foreign_tbl_name")}

#: Name listings → the argument naming the database of the tables listed (None: databases).
LISTINGS: dict[str, str | None] = {
    "get_all_databases": None,
    "get_databases": None,
    "get_all_tables": "db_name",
    "get_tables": "db_name",
    "get_tables_by_type": "db_name",
    "get_table_names_by_filter": "dbname",
}
#: Object listings → (path of the list in the result, item attributes naming database and
#: table; table None: the items follow their database).
OBJECT_LISTINGS: dict[str, tuple[str, str, str | None]] = {
    "get_table_objects_by_name": ("success", "dbName", "tableName"),
    "get_table_objects_by_name_req": ("success.tables", "dbName", "tableName"),
    "get_table_meta": ("success", "dbName", "tableName"),
    "get_all_functions": ("success.functions", "dbName", None),
}

#: Replies that carry columns.
COLUMN_REPLIES = frozenset(m for m, r in READS.items() if r.columns) | {"get_table_objects_by_name"}

#: Replies that are a ``list<Partition>`` (column filtering by splicing bytes:
#: :mod:`gateway.hms_thrift.partition_splice`).
PARTITION_LISTS = frozenset({
    "get_partitions", "get_partitions_with_auth", "get_partitions_ps", "get_partitions_ps_with_auth",
    "get_partitions_by_filter", "get_partitions_by_names"})

#: Methods that name no database, table or column: nothing to judge.
NEUTRAL = frozenset({
    "partition_name_has_valid_characters", "partition_name_to_vals", "partition_name_to_spec",
    "get_current_notificationEventId", "getMetaConf", "get_config_value",
    "getName", "getVersion", "getStatus", "getStatusDetails", "aliveSince",
})


class Write(NamedTuple):
    """A write: argument paths of its database and table (None: a database) and the Ranger
    Hive access type it needs."""

    db: str
    table: str | None
    access: str


#: Every write the policy judges (any other write is refused while a policy is attached).
WRITES: dict[str, Write] = {
    "create_database": Write("database.name", None, "create"),
    "drop_database": Write("name", None, "drop"),
    "alter_database": Write("dbname", None, "alter"),
    "create_table": Write("tbl.dbName", "tbl.tableName", "create"),
    "create_table_with_environment_context": Write("tbl.dbName", "tbl.tableName", "create"),
    "drop_table": Write("dbname", "name", "drop"),
    "drop_table_with_environment_context": Write("dbname", "name", "drop"),
    "alter_table": Write("dbname", "tbl_name", "alter"),
    "alter_table_with_environment_context": Write("dbname", "tbl_name", "alter"),
    "alter_table_with_cascade": Write("dbname", "tbl_name", "alter"),
    "add_partition": Write("new_part.dbName", "new_part.tableName", "alter"),
    "drop_partition": Write("db_name", "tbl_name", "alter"),
    "drop_partition_by_name": Write("db_name", "tbl_name", "alter"),
}
#: Writes that send a whole table back: refused to a user who does not see every column.
WHOLE_TABLE_WRITES = frozenset({"alter_table", "alter_table_with_environment_context", "alter_table_with_cascade"})

#: Methods whose replies the policy reads (listings and replies carrying columns).
REPLY_METHODS = frozenset(LISTINGS) | frozenset(OBJECT_LISTINGS) | COLUMN_REPLIES

#: Hive's naming of methods that only read (``get_*``, ``fetch_*``, ``show_*``… and fb303's
#: getters), for the many reads the tables above do not name.
_READ_PREFIXES = ("get", "fetch_", "show_", "list_", "partition_name_", "check_", "aliveSince")
#: Reads the tables above name whatever their names say (``isPartitionMarkedForEvent``).
_NAMED_READS = frozenset(READS) | frozenset(LISTINGS) | frozenset(OBJECT_LISTINGS) | NEUTRAL


def is_read_only(method: str) -> bool:
    """True when the HMS method ``method`` cannot change anything, so a retry on another
    upstream is harmless and the metadata cache has nothing to drop: a read these tables name,
    or a method Hive names as a read."""
    return method in _NAMED_READS or method.startswith(_READ_PREFIXES)


def argument(args, path: str):
    """``args.a.b`` for ``path`` ``"a.b"``; None when a part is missing."""
    value = args
    for part in path.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def check_paths(schema: ServiceSchema) -> None:
    """Raise ``ValueError`` naming the method or argument when the IDL of ``schema`` lacks one
    these tables name (another IDL than Hive 2.3's)."""
    paths: dict[str, tuple[str | None, ...]] = {m: (a,) for m, a in LISTINGS.items()}
    paths.update({m: (r.db, r.table, r.column) for m, r in READS.items()})
    paths.update({m: (w.db, w.table) for m, w in WRITES.items()})
    for name, second in SECOND_TABLE.items():
        paths[name] = paths[name] + second
    check_argument_paths(schema, paths)


def check_argument_paths(schema: ServiceSchema, paths: dict[str, tuple[str | None, ...]]) -> None:
    """Raise ``ValueError`` naming the method or argument when the IDL of ``schema`` lacks a
    method of ``paths`` or one of its dotted argument paths (``"tbl.dbName"``; None skipped)."""
    for name, arguments in paths.items():
        method = schema.methods.get(name)
        if method is None:
            raise ValueError(f"the IDL has no method {name}")
        for path in filter(None, arguments):
            cls = method.args_class
            for part in path.split("."):
                spec = {f[1]: f for f in (cls.thrift_spec or {}).values()} if cls is not None else {}
                if part not in spec:
                    raise ValueError(f"{name} has no argument {path} in this IDL")
                cls = spec[part][2] if len(spec[part]) > 2 and isinstance(spec[part][2], type) else None
