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

from .schema import ServiceSchema, TType


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
    """A write: argument paths of its database and table (None: a database), the Ranger Hive
    access type it needs, the paths of the storage locations it may set (each needs Ranger's
    ``url`` permission, :meth:`gateway.policy.view.CatalogView.url_refusal`), and the paths by
    which the partitions it carries name their table again (judged too where given).

    A path through a list fans out over its items (``new_parts.sd.location``: each partition's),
    and a path into a map ends with the key (``tbl.parameters.metadata_location``):
    :func:`arguments`."""

    db: str
    table: str | None
    access: str
    locations: tuple[str, ...] = ()
    parts: tuple[str, str] | None = None
    #: Paths of the database and name an alter gives the object: where they differ from its own
    #: (a rename, into another database or not), the target database needs ``create``, as the
    #: ``iceberg-rest`` service's ``renameTable`` asks (:func:`renamed_into`).
    renamed: tuple[str, str] | None = None


#: Where a table sets storage: its location, and the metadata file Iceberg's ``HiveCatalog``
#: (and the ``iceberg-rest`` service) read it from. Ranger's HMS authorizer asks ``url`` rights
#: on a location a create or alter sets: a database's, a table's, a partition's.
_NEW_TABLE = ("tbl.sd.location", "tbl.parameters.metadata_location")
_ALTERED_TABLE = ("new_tbl.sd.location", "new_tbl.parameters.metadata_location")
_PARTS = ("new_parts.dbName", "new_parts.tableName")
_RENAMED = ("new_tbl.dbName", "new_tbl.tableName")

#: Every write the policy judges (any other write is refused while a policy is attached).
WRITES: dict[str, Write] = {
    "create_database": Write("database.name", None, "create", ("database.locationUri",)),
    "drop_database": Write("name", None, "drop"),
    "alter_database": Write("dbname", None, "alter", ("db.locationUri",)),
    "create_table": Write("tbl.dbName", "tbl.tableName", "create", _NEW_TABLE),
    "create_table_with_environment_context": Write("tbl.dbName", "tbl.tableName", "create", _NEW_TABLE),
    "drop_table": Write("dbname", "name", "drop"),
    "drop_table_with_environment_context": Write("dbname", "name", "drop"),
    "alter_table": Write("dbname", "tbl_name", "alter", _ALTERED_TABLE, renamed=_RENAMED),
    "alter_table_with_environment_context": Write("dbname", "tbl_name", "alter", _ALTERED_TABLE, renamed=_RENAMED),
    "alter_table_with_cascade": Write("dbname", "tbl_name", "alter", _ALTERED_TABLE, renamed=_RENAMED),
    "add_partition": Write("new_part.dbName", "new_part.tableName", "alter", ("new_part.sd.location",)),
    "add_partition_with_environment_context": Write("new_part.dbName", "new_part.tableName", "alter",
                                                    ("new_part.sd.location",)),
    "add_partitions": Write(*_PARTS, "alter", ("new_parts.sd.location",)),
    "add_partitions_req": Write("request.dbName", "request.tblName", "alter", ("request.parts.sd.location",),
                                ("request.parts.dbName", "request.parts.tableName")),
    **{m: Write("db_name", "tbl_name", "alter", ("new_part.sd.location",), ("new_part.dbName", "new_part.tableName"))
       for m in ("alter_partition", "alter_partition_with_environment_context")},
    **{m: Write("db_name", "tbl_name", "alter", ("new_parts.sd.location",), _PARTS)
       for m in ("alter_partitions", "alter_partitions_with_environment_context")},
    "drop_partition": Write("db_name", "tbl_name", "alter"),
    "drop_partition_by_name": Write("db_name", "tbl_name", "alter"),
}
#: Writes that send a whole table back: refused to a user who does not see every column.
WHOLE_TABLE_WRITES = frozenset({"alter_table", "alter_table_with_environment_context", "alter_table_with_cascade"})
#: Writes that send back what a read gave (a table, partitions with their storage descriptor's
#: columns): refused to a user who does not see every column, else they would write the
#: filtered columns back.
WRITE_BACKS = WHOLE_TABLE_WRITES | frozenset({
    "alter_partition", "alter_partition_with_environment_context", "alter_partitions",
    "alter_partitions_with_environment_context"})
#: Writes that send an existing object back whole: a location they carry that equals the
#: object's current one is not being set (Ranger's HMS authorizer asks ``url`` rights only on a
#: changed location), so a user without them may still alter the rest.
ALTERS = WRITE_BACKS | {"alter_database"}

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


def arguments(args, path: str) -> list:
    """Every value at ``path`` in ``args``: a list on the way fans out over its items, a map is
    entered by key (``"new_parts.sd.location"``, ``"tbl.parameters.metadata_location"``);
    missing parts give nothing."""
    values = [args]
    for part in path.split("."):
        step = []
        for value in values:
            value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
            if isinstance(value, (list, tuple)):
                step.extend(v for v in value if v is not None)
            elif value is not None:
                step.append(value)
        values = step
    return values


def written_objects(write: Write, args) -> list[tuple[str, str | None]]:
    """The distinct ``(database, table)`` pairs a call of ``write`` with ``args`` names (table
    None for a database write; ``""`` for a name the call leaves out, which no policy grants),
    in the order named: its own arguments' (one pair per partition where they name them in a
    list), then the pairs its partitions give (:attr:`Write.parts`, where given)."""
    if write.table is None:
        dbs = arguments(args, write.db)
        return [(db if isinstance(db, str) else "", None) for db in dbs[:1] or [""]]
    pairs = list(_pairs(args, write.db, write.table)) or [("", "")]
    if write.parts is not None:
        pairs += [p for p in _pairs(args, *write.parts) if p[0] or p[1]]
    return list(dict.fromkeys(pairs))


def renamed_into(write: Write, args, named: tuple[str, str | None]) -> str | None:
    """The database a call of ``write`` with ``args`` renames its object into (HMS compares
    names case-insensitively), or None when it keeps the object's name ``named``
    (``(database, table)``) or renames nothing."""
    if write.renamed is None:
        return None
    db, table = (argument(args, path) for path in write.renamed)
    if not isinstance(db, str) or not isinstance(table, str):
        return None  # HMS refuses an alter without a name
    if (db.lower(), table.lower()) == tuple((n or "").lower() for n in named):
        return None
    return db


def _pairs(args, db_path: str, table_path: str):
    """``(database, table)`` pairs, walking both paths together to their last list."""
    *head, db_name = db_path.split(".")
    *table_head, table_name = table_path.split(".")
    assert head == table_head, "both paths lead to one object"
    for item in arguments(args, ".".join(head)) if head else [args]:
        db, table = getattr(item, db_name, None), getattr(item, table_name, None)
        yield (db if isinstance(db, str) else "", table if isinstance(table, str) else "")


def check_paths(schema: ServiceSchema) -> None:
    """Raise ``ValueError`` naming the method or argument when the IDL of ``schema`` lacks one
    these tables name (another IDL than Hive 2.3's)."""
    paths: dict[str, tuple[str | None, ...]] = {m: (a,) for m, a in LISTINGS.items()}
    paths.update({m: (r.db, r.table, r.column) for m, r in READS.items()})
    paths.update({m: (w.db, w.table, *w.locations, *(w.parts or ()), *(w.renamed or ())) for m, w in WRITES.items()})
    for name, second in SECOND_TABLE.items():
        paths[name] = paths[name] + second
    check_argument_paths(schema, paths)


def check_argument_paths(schema: ServiceSchema, paths: dict[str, tuple[str | None, ...]]) -> None:
    """Raise ``ValueError`` naming the method or argument when the IDL of ``schema`` lacks a
    method of ``paths`` or one of its dotted argument paths (``"tbl.dbName"``; None skipped; a
    list's items are walked into, a map's key ends a path: :func:`arguments`)."""
    for name, arguments_ in paths.items():
        method = schema.methods.get(name)
        if method is None:
            raise ValueError(f"the IDL has no method {name}")
        for path in filter(None, arguments_):
            cls = method.args_class
            parts = path.split(".")
            for index, part in enumerate(parts):
                spec = {f[1]: f for f in (cls.thrift_spec or {}).values()} if cls is not None else {}
                if part not in spec:
                    raise ValueError(f"{name} has no argument {path} in this IDL")
                kind, detail = spec[part][0], spec[part][2] if len(spec[part]) > 2 else None
                if kind == TType.MAP and index == len(parts) - 2:
                    break  # the last part is the key
                if kind == TType.LIST and isinstance(detail, tuple) and detail[0] == TType.STRUCT:
                    detail = detail[1]  # into the list's items
                cls = detail if isinstance(detail, type) else None
