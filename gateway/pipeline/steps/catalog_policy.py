"""Catalog policy on the Thrift API (Apache Ranger's Hive model, :mod:`gateway.policy`): each user
sees only the databases, tables and columns a policy grants.

What HMS's own filter hook (``MetaStoreFilterHook``) does, done in front of HMS, for every read
method of the Hive 2.3 IDL that lists or names a database, table, partition, index or function:

* listings keep only the names the user may see (Ranger's ``_any`` access: some access on the
  object or on something below it); functions follow their database;
* a call naming an object the user may not see is answered exactly as HMS 2.3.10 answers for a
  missing object (measured per method, table :data:`_READS`), so that a refusal cannot be told
  from absence and cannot be used to probe for names; nothing reaches HMS;
* columns the user may not ``select`` are removed from tables, partitions, indexes, field lists,
  column statistics, key constraints and the column-bearing table properties
  (:mod:`gateway.policy.columns`); partition keys stay (partition values and names carry them);
* writes need the matching Ranger access; ``alter_table`` by a user who does not see every
  column is refused too (it would write the filtered schema back);
* methods naming no catalog object (:data:`_NEUTRAL`) pass; any other method is refused while a
  policy is attached (fail closed): a ``MetaException`` "does not have privileges" where the
  method declares one, else a ``TApplicationException``.

docs/security.md lists every method and what is checked.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import struct
import sys
from collections.abc import Callable, Iterator
from typing import NamedTuple

from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.thrift import TPayload, TType, gen_init
from thriftpy2.transport import TMemoryBuffer

from gateway.observability import metrics
from gateway.pipeline.exchange import Exchange
from gateway.pipeline.outcomes import Answered
from gateway.pipeline.reply import Reply
from gateway.pipeline.step import Step
from gateway.pipeline.thrift_objects import decode_args, decode_struct, encode_reply
from gateway.policy import Decision, PolicyEngine, Resource
from gateway.policy.columns import filter_parameters
from gateway.thrift.codec import BINARY
from gateway.thrift.schema import MethodSchema, ServiceSchema
from gateway.thrift.errors import ProtocolError
from gateway.thrift.translate import INTERNAL_ERROR

log = logging.getLogger(__name__)


class _Read(NamedTuple):
    """A read naming one object: argument paths of its database and table (None: the call
    names a database only), how HMS 2.3 answers when it is missing (a key of ``_MISSING``),
    whether the reply carries columns, and the argument naming a column (statistics)."""

    db: str
    table: str | None
    missing: str
    columns: bool = False
    column: str | None = None


_T = ("db_name", "tbl_name")
#: Every read naming one object (measured against HMS 2.3.10 for a missing database and table).
_READS: dict[str, _Read] = {
    "get_database": _Read("name", None, "no_such_database"),
    "get_function": _Read("dbName", None, "no_such_function"),
    "get_functions": _Read("dbName", None, "empty"),
    "get_table": _Read("dbname", "tbl_name", "no_such_table", True),
    "get_table_req": _Read("req.dbName", "req.tblName", "no_such_table", True),
    **{m: _Read("db_name", "table_name", "unknown_table", True) for m in (
        "get_fields", "get_fields_with_environment_context", "get_schema", "get_schema_with_environment_context")},
    **{m: _Read(*_T, "no_such_table", True) for m in (
        "get_partition", "get_partition_with_auth", "get_partition_by_name", "get_partitions",
        "get_partitions_pspec", "get_partitions_ps", "get_partitions_ps_with_auth", "get_partitions_by_filter",
        "get_part_specs_by_filter", "get_partitions_by_names")},
    "get_partitions_by_expr": _Read("req.dbName", "req.tblName", "no_such_table", True),
    "get_partitions_with_auth": _Read(*_T, "empty", True),
    "get_partition_names": _Read(*_T, "internal_error"),
    "get_partition_names_ps": _Read(*_T, "no_such_table"),
    "isPartitionMarkedForEvent": _Read(*_T, "unknown_table_event"),
    "get_index_by_name": _Read(*_T, "no_such_index", True),
    "get_indexes": _Read(*_T, "empty", True),
    "get_index_names": _Read(*_T, "empty"),
    "get_primary_keys": _Read("request.db_name", "request.tbl_name", "empty", True),
    "get_foreign_keys": _Read("request.parent_db_name", "request.parent_tbl_name", "empty", True),
    "get_table_column_statistics": _Read(*_T, "no_such_db_table", True, "col_name"),
    "get_partition_column_statistics": _Read(*_T, "no_such_db_table", True, "col_name"),
    "get_table_statistics_req": _Read("request.dbName", "request.tblName", "no_such_db_table", True),
    "get_partitions_statistics_req": _Read("request.dbName", "request.tblName", "no_such_db_table", True),
    "get_aggr_stats_for": _Read("request.dbName", "request.tblName", "no_such_db_table", True),
    "get_table_objects_by_name_req": _Read("req.dbName", None, "unknown_database", True),
}
#: get_foreign_keys names a second table: both must be visible.
_SECOND_TABLE = {"get_foreign_keys": ("request.foreign_db_name", "request.foreign_tbl_name")}

#: Name listings → the argument naming the database of the tables listed (None: databases).
_LISTINGS: dict[str, str | None] = {
    "get_all_databases": None,
    "get_databases": None,
    "get_all_tables": "db_name",
    "get_tables": "db_name",
    "get_tables_by_type": "db_name",
    "get_table_names_by_filter": "dbname",
}
#: Object listings → (path of the list in the result, item attributes naming database and
#: table; table None: the items follow their database).
_OBJECT_LISTINGS: dict[str, tuple[str, str, str | None]] = {
    "get_table_objects_by_name": ("success", "dbName", "tableName"),
    "get_table_objects_by_name_req": ("success.tables", "dbName", "tableName"),
    "get_table_meta": ("success", "dbName", "tableName"),
    "get_all_functions": ("success.functions", "dbName", None),
}

#: Replies that carry columns.
_COLUMN_REPLIES = frozenset(m for m, r in _READS.items() if r.columns) | {"get_table_objects_by_name"}

#: Replies that are a ``list<Partition>`` (column filtering by splicing, :class:`_PartitionColumns`).
_PARTITION_LISTS = frozenset({
    "get_partitions", "get_partitions_with_auth", "get_partitions_ps", "get_partitions_ps_with_auth",
    "get_partitions_by_filter", "get_partitions_by_names"})

#: Methods that name no database, table or column: nothing to judge.
_NEUTRAL = frozenset({
    "partition_name_has_valid_characters", "partition_name_to_vals", "partition_name_to_spec",
    "get_current_notificationEventId", "getMetaConf", "get_config_value",
    "getName", "getVersion", "getStatus", "getStatusDetails", "aliveSince",
})

#: Writes → (database argument path, table argument path or None, Ranger access type).
_WRITES: dict[str, tuple[str, str | None, str]] = {
    "create_database": ("database.name", None, "create"),
    "drop_database": ("name", None, "drop"),
    "alter_database": ("dbname", None, "alter"),
    "create_table": ("tbl.dbName", "tbl.tableName", "create"),
    "create_table_with_environment_context": ("tbl.dbName", "tbl.tableName", "create"),
    "drop_table": ("dbname", "name", "drop"),
    "drop_table_with_environment_context": ("dbname", "name", "drop"),
    "alter_table": ("dbname", "tbl_name", "alter"),
    "alter_table_with_environment_context": ("dbname", "tbl_name", "alter"),
    "alter_table_with_cascade": ("dbname", "tbl_name", "alter"),
    "add_partition": ("new_part.dbName", "new_part.tableName", "alter"),
    "drop_partition": ("db_name", "tbl_name", "alter"),
    "drop_partition_by_name": ("db_name", "tbl_name", "alter"),
}
#: Writes that send a whole table back: refused to a user who does not see every column.
_WHOLE_TABLE_WRITES = frozenset({"alter_table", "alter_table_with_environment_context", "alter_table_with_cascade"})


def _argument(args, path: str):
    """``args.a.b`` for ``path`` ``"a.b"``; None when a part is missing."""
    value = args
    for part in path.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _declared(method: MethodSchema | None, struct_name: str) -> tuple[str, type] | None:
    """(result attribute, thriftpy2 class) of the exception ``struct_name`` that ``method``
    declares, or None."""
    if method is None or method.result_class is None:
        return None
    for spec in (method.result_class.thrift_spec or {}).values():
        if len(spec) > 2 and isinstance(spec[2], type) and spec[2].__name__ == struct_name:
            return spec[1], spec[2]
    return None


def _empty_success(method: MethodSchema):
    """The method's result with an empty ``success``: ``[]``, or its struct with empty lists."""
    result = method.result_class()  # type: ignore[misc]
    spec = method.result_class.thrift_spec[0]  # type: ignore[union-attr]
    if spec[0] == 15:  # TType.LIST
        result.success = []
    else:
        value = spec[2]()
        for field in value.thrift_spec.values():
            if field[0] == 15:
                setattr(value, field[1], [])
        result.success = value
    return result


Keep = Callable[[str], bool]


class _Columns:
    """Which columns one user keeps, per table, for one reply (decisions cached per reply)."""

    def __init__(self, engine: PolicyEngine, user: str, groups: frozenset[str]):
        self.engine, self.user, self.groups = engine, user, groups
        self._tables: dict[tuple[str, str], Keep | None] = {}
        self.hidden: set[tuple[str, str, str]] = set()  # (database, table, column) removed

    def keep(self, database: str | None, table: str | None) -> Keep | None:
        """None: every column of the table stays; else a predicate on column names."""
        key = ((database or "").lower(), (table or "").lower())
        if key in self._tables:
            return self._tables[key]
        uniform = self.engine.columns_uniform(self.user, self.groups, key[0], key[1])
        if uniform is not None and uniform.allowed:
            keep = None
        elif uniform is not None:
            keep = self._counting(key, lambda name: False)
        else:
            decided: dict[str, bool] = {}
            engine, user, groups = self.engine, self.user, self.groups

            def allowed(name: str) -> bool:
                low = (name or "").lower()
                verdict = decided.get(low)
                if verdict is None:
                    verdict = decided[low] = engine.evaluate(
                        user, groups, Resource(key[0], key[1], low), "select").allowed
                return verdict
            keep = self._counting(key, allowed)
        self._tables[key] = keep
        return keep

    def _counting(self, table: tuple[str, str], keep: Keep) -> Keep:
        def counted(name: str) -> bool:
            if keep(name):
                return True
            self.hidden.add((*table, (name or "").lower()))
            return False
        return counted

    # --- the objects that carry columns ---------------------------------------------------

    def sd(self, sd, keep: Keep) -> None:
        if sd is not None and sd.cols:
            sd.cols = [c for c in sd.cols if keep(c.name)]

    def table(self, table) -> None:
        keep = self.keep(table.dbName, table.tableName)
        if keep is not None:
            self.sd(table.sd, keep)
            table.parameters = filter_parameters(table.parameters, keep)

    def partition(self, part, keep: Keep | None = None) -> None:
        keep = keep or self.keep(part.dbName, part.tableName)
        if keep is not None:
            self.sd(part.sd, keep)
            if part.parameters and "COLUMN_STATS_ACCURATE" in part.parameters:
                part.parameters = filter_parameters(part.parameters, keep)

    def partition_spec(self, spec) -> None:
        keep = self.keep(spec.dbName, spec.tableName)
        if keep is None:
            return
        if spec.sharedSDPartitionSpec is not None:
            self.sd(spec.sharedSDPartitionSpec.sd, keep)
        if spec.partitionList is not None:
            for part in spec.partitionList.partitions or ():
                self.partition(part, keep)

    def statistics(self, stats) -> None:
        """A ``ColumnStatistics``: its objects of denied columns removed."""
        desc = stats.statsDesc
        keep = self.keep(desc.dbName if desc else None, desc.tableName if desc else None)
        if keep is not None and stats.statsObj:
            stats.statsObj = [o for o in stats.statsObj if keep(o.colName)]


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a partial decode: it builds thousands of
    acyclic objects, freed by reference counting before the block ends, and each collection
    they would set off walks every live object for nothing (get_partitions(5000) beside a
    server-sized heap: the step took 70 ms of CPU with the collector on, 22 ms paused)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _partial(name: str, spec: dict) -> type:
    """A thriftpy2 struct class reading only the fields of ``spec``; the decoder skips the
    others in C, without building objects for them."""
    return gen_init(type(name, (TPayload,), {}), spec, [(f[1], None) for f in spec.values()])


class _PartitionColumns:
    """Column filtering of a ``list<Partition>`` reply by splicing bytes, not by decoding and
    re-encoding 5,000 partitions (issue 11 item 10: <= 1.5x a direct call).

    HMS's Java code writes a struct's fields in IDL order, so a partition's ``sd`` starts with
    its ``cols`` list: the bytes ``sd`` header + ``cols`` header (:attr:`_COLS`) open each
    partition's column list. Steps, each cheap next to decoding the partitions:

    1. a shape decode (database, table, and whether ``sd.cols`` is there; the decoder skips
       the rest in C) counts the partitions R that carry columns;
    2. :attr:`_COLS` must occur exactly R times in the message (the pattern cannot overlap
       itself, so ``bytes.count`` counts every occurrence): R are the partitions' own, so none
       sits inside a string or a number, and every occurrence is a partition's column list;
    3. one table and every partition with the first one's column list (``bytes.split`` of
       that list as encoded gives R + 1 pieces; each match starts at a real list, so the
       matches are the R lists): the filtered list joins the pieces;
    4. otherwise the full partial decode (database, table, ``sd.cols`` of each partition)
       plans one edit per distinct list, applied in order.

    It returns None, and the caller takes the object path, when Hive's
    ``COLUMN_STATS_ACCURATE`` names columns, when step 2's count differs (the bytes also sit
    in a value), or when a match is missing.
    """

    _SD_HEADER = b"\x0c\x00\x06"  # Partition field 6 (sd), a struct
    _COLS = _SD_HEADER + b"\x0f\x00\x01"  # then StorageDescriptor field 1 (cols), a list

    def __init__(self, schema: ServiceSchema):
        module = sys.modules[schema.methods["get_partitions"].result_class.__module__]
        self._sd = _partial("_PolicySdCols", {1: (TType.LIST, "cols", (TType.STRUCT, module.FieldSchema), False)})
        self._result = self._partitions("", self._sd)
        # cols read as a list<i32>: thriftpy2 skips a list of another element type and gives
        # [], so ``cols`` is [] when HMS sent it, None when not, and no FieldSchema is built
        self._shape = self._partitions("Shape", _partial("_PolicySdShape", {1: (TType.LIST, "cols", TType.I32, False)}))

    @staticmethod
    def _partitions(kind: str, sd: type) -> type:
        """A result class reading ``success`` as partitions of database, table and ``sd``."""
        part = _partial(f"_PolicyPartition{kind}", {
            2: (TType.STRING, "dbName", False), 3: (TType.STRING, "tableName", False),
            6: (TType.STRUCT, "sd", sd, False)})
        return _partial(f"_PolicyPartitions{kind}Result", {0: (TType.LIST, "success", (TType.STRUCT, part), False)})

    @staticmethod
    def _list_bytes(cols: list) -> bytes:
        """``sd`` field header, then field 1 (cols) as Thrift's binary protocol writes it."""
        buffer = TMemoryBuffer()
        proto = TBinaryProtocol(buffer)
        for col in cols:
            proto.write_struct(col)
        buffer.flush()
        return _PartitionColumns._COLS + b"\x0c" + struct.pack("!i", len(cols)) + buffer.getvalue()

    def filter(self, message: bytes, columns: "_Columns") -> bytes | None:
        """``message`` without the denied columns (None: take the object path)."""
        if b'"COLUMN_STATS"' in message:
            return None  # column names in partition parameters: the object path rewrites them
        with _collector_paused():
            try:
                parts = decode_struct(message, self._shape).success or ()
            except ProtocolError:
                return None
            carrying = [(p.dbName, p.tableName) for p in parts if p.sd is not None and p.sd.cols is not None]
            count, tables = len(carrying), set(carrying)
            del parts, carrying
        keeps = [keep for keep in (columns.keep(*t) for t in tables) if keep is not None]
        if not keeps:
            return message  # no columns, or every table's columns all visible
        if message.count(self._COLS) != count:
            return None  # the header bytes sit in a value too: no splicing
        if len(tables) == 1:
            spliced = self._uniform(message, count, keeps[0])
            if spliced is not None:
                return spliced
        return self._per_partition(message, columns)

    def _uniform(self, message: bytes, count: int, keep: Keep) -> bytes | None:
        """The ``count`` partitions' column lists, all equal to the first, filtered by ``keep``
        (None: they differ, or the first is not encoded as thriftpy2 would write it)."""
        at = message.find(self._COLS)
        # the whole message, not a window of it: thriftpy2's memory buffer does not raise when
        # a read runs past its end, it leaves the bytes it could not read undefined
        buffer = TMemoryBuffer(message)
        buffer.read(at + len(self._SD_HEADER))
        try:
            cols = TBinaryProtocol(buffer).read_struct(self._sd()).cols or []
        except Exception:  # thriftpy2 raises its own and struct errors
            return None
        old = self._list_bytes(cols)
        if not message.startswith(old, at):
            return None
        pieces = message.split(old)
        if len(pieces) != count + 1:
            return None  # some partitions have other columns
        kept = [c for c in cols if keep(c.name)]
        return message if len(kept) == len(cols) else self._list_bytes(kept).join(pieces)

    def _per_partition(self, message: bytes, columns: "_Columns") -> bytes | None:
        """Each partition's column list decoded and filtered for its own table, spliced in order."""
        with _collector_paused():
            return self._edits(message, columns)

    def _edits(self, message: bytes, columns: "_Columns") -> bytes | None:
        try:
            parts = decode_struct(message, self._result).success
        except ProtocolError:
            return None
        edits: dict[tuple, tuple[bytes, bytes] | None] = {}  # partitions mostly share their columns
        plan: list[tuple[bytes, bytes]] = []
        for part in parts:
            cols = part.sd.cols if part.sd is not None else None
            if not cols:
                continue
            key = (part.dbName, part.tableName, *((c.name, c.type, c.comment) for c in cols))
            if key in edits:
                edit = edits[key]
            else:
                keep = columns.keep(part.dbName, part.tableName)
                kept = cols if keep is None else [c for c in cols if keep(c.name)]
                edit = edits[key] = None if len(kept) == len(cols) else (self._list_bytes(cols), self._list_bytes(kept))
            if edit is not None:
                plan.append(edit)
        if not plan:
            return message
        expected: dict[bytes, int] = {}
        for old, _ in plan:
            expected[old] = expected.get(old, 0) + 1
        if any(message.count(old) != n for old, n in expected.items()):
            return None  # another table's partitions share a list: no splicing
        out, cursor = [], 0
        for old, new in plan:
            at = message.find(old, cursor)
            if at < 0:
                return None
            out += (message[cursor:at], new)
            cursor = at + len(old)
        out.append(message[cursor:])
        return b"".join(out)


class CatalogPolicy(Step):
    """Enforces ``engine`` on one ``hms-thrift`` service (see the module docstring)."""

    name = "catalog-policy"
    reply_methods = frozenset(_LISTINGS) | frozenset(_OBJECT_LISTINGS) | _COLUMN_REPLIES

    def __init__(self, topology: str, service: str, engine: PolicyEngine, schema: ServiceSchema):
        self.topology, self.service, self.engine, self.schema = topology, service, engine, schema
        paths: dict[str, tuple[str | None, ...]] = {m: (a,) for m, a in _LISTINGS.items()}
        paths.update({m: (r.db, r.table, r.column) for m, r in _READS.items()})
        paths.update({m: w[:2] for m, w in _WRITES.items()})
        for name, second in _SECOND_TABLE.items():
            paths[name] = paths[name] + second
        for name, arguments in paths.items():
            self._check_paths(name, arguments)
        self._partition_columns = _PartitionColumns(schema)
        self._decisions = {
            outcome: metrics.POLICY_DECISIONS.labels(topology=topology, service=service, outcome=outcome)
            for outcome in ("allowed", "denied", "hidden", "unjudged", "columns_hidden")
        }

    def _check_paths(self, name: str, arguments: tuple[str | None, ...]) -> None:
        """Raise ``ValueError`` when the IDL has no such method or argument (another IDL)."""
        method = self.schema.methods.get(name)
        if method is None:
            raise ValueError(f"the IDL has no method {name}")
        for path in filter(None, arguments):
            cls = method.args_class
            for part in path.split("."):
                spec = {f[1]: f for f in (cls.thrift_spec or {}).values()} if cls is not None else {}
                if part not in spec:
                    raise ValueError(f"{name} has no argument {path} in this IDL")
                cls = spec[part][2] if len(spec[part]) > 2 and isinstance(spec[part][2], type) else None

    @staticmethod
    def _who(exchange: Exchange) -> tuple[str, frozenset[str]]:
        identity = exchange.identity
        assert identity is not None, "identity assertion runs first"
        return identity.user, identity.groups

    def _audit(self, exchange: Exchange, decision: Decision | None, allowed: bool, access: str) -> None:
        event = exchange.event
        event.policy_decision = "allowed" if allowed else "denied"
        event.policy_access = access
        if decision is not None:
            event.policy_id = decision.policy_id

    def wants_reply(self, exchange: Exchange) -> bool:
        """Whether this request's reply needs :meth:`on_reply`, from the request alone: False
        for a read of a table whose every column the user may see (the reply then streams)."""
        header = exchange.header
        assert header is not None
        read = _READS.get(header.name)
        if read is None or read.table is None or header.name in _SECOND_TABLE:
            return header.name in self.reply_methods
        args = decode_args(exchange.call, self.schema.methods[header.name])
        user, groups = self._who(exchange)
        uniform = self.engine.columns_uniform(
            user, groups, _argument(args, read.db) or "", _argument(args, read.table) or "")
        return not (uniform is not None and uniform.allowed)

    async def on_call(self, exchange: Exchange) -> None:
        header = exchange.header
        assert header is not None
        name = header.name
        if name in _LISTINGS or (name in _OBJECT_LISTINGS and name not in _READS) or name in _NEUTRAL:
            return  # listings are judged on the reply
        method = self.schema.methods.get(name)
        user, groups = self._who(exchange)
        if name in _WRITES and method is not None:
            self._check_write(exchange, method, user, groups)
            return
        read = _READS.get(name)
        if read is None or method is None:
            self._decisions["unjudged"].inc()
            exchange.event.policy_decision = "denied"
            log.info("catalog policy of %s/%s cannot judge %s: refused for %s",
                     self.topology, self.service, name[:100], user)
            raise Answered(f"catalog policy: {name[:100]} is not allowed under a policy",
                           self._refusal(method, name, header.seqid, user))
        args = decode_args(exchange.call, method)
        database = _argument(args, read.db) or ""
        table = (_argument(args, read.table) or "") if read.table else None
        decision = self.engine.evaluate(user, groups, Resource(database, table), "_any")
        second = _SECOND_TABLE.get(name)
        if decision.allowed and second is not None:
            other_db, other_table = (_argument(args, p) for p in second)
            if other_db is not None or other_table is not None:
                decision = self.engine.evaluate(user, groups, Resource(other_db or "", other_table or ""), "_any")
                if not decision.allowed:
                    database, table = other_db or "", other_table or ""
        self._audit(exchange, decision, decision.allowed, "_any")
        if decision.allowed:
            column = _argument(args, read.column) if read.column else None
            if column is None or self.engine.evaluate(
                    user, groups, Resource(database, table, column), "select").allowed:
                self._decisions["allowed"].inc()
                return
            # a denied column's statistics: HMS's answer when it has none (an empty result)
            self._decisions["columns_hidden"].inc()
            exchange.event.policy_hidden = 1
            raise Answered(f"catalog policy: column {column[:100]} not visible to {user}",
                           encode_reply(name, header.seqid, method.result_class()))  # type: ignore[misc]
        self._decisions["denied"].inc()
        shown = database if table is None else f"{database}.{table}"
        log.info("catalog policy of %s/%s hides %s from %s (%s)",
                 self.topology, self.service, shown[:200], user, name)
        raise Answered(f"catalog policy: {shown} not visible to {user}",
                       self._missing(method, name, header.seqid, read.missing, database, table, args))

    def _check_write(self, exchange: Exchange, method: MethodSchema, user: str, groups: frozenset[str]) -> None:
        header = exchange.header
        assert header is not None
        db_path, table_path, access = _WRITES[header.name]
        args = decode_args(exchange.call, method)
        database = _argument(args, db_path) or ""
        table = _argument(args, table_path) if table_path else None
        decision = self.engine.evaluate(user, groups, Resource(database, table or None), access)
        name = database if table is None else f"{database}.{table}"
        allowed = decision.allowed
        message = f"User {user} does not have privileges for {access.upper()} on {name}"
        if allowed and header.name in _WHOLE_TABLE_WRITES:
            uniform = self.engine.columns_uniform(user, groups, database, table or "")
            if not (uniform is not None and uniform.allowed):
                allowed = False  # the table they would send back lacks the columns they cannot see
                message += ": some of its columns are hidden from this user"
        self._audit(exchange, decision, allowed, access)
        if allowed:
            self._decisions["allowed"].inc()
            return
        self._decisions["denied"].inc()
        log.info("catalog policy of %s/%s denies %s %s to %s (%s)",
                 self.topology, self.service, access, name[:200], user, decision.reason)
        raise Answered(f"catalog policy: {access} on {name} denied to {user} ({decision.reason})",
                       _exception_reply(method, header.name, header.seqid, "MetaException", message))

    async def on_reply(self, exchange: Exchange, reply: Reply) -> None:
        if reply.is_exception:
            return
        name = reply.header.name
        if name in _READS and not self.wants_reply(exchange):
            return  # every column visible: the reply is not even decoded
        user, groups = self._who(exchange)
        if name in _PARTITION_LISTS:
            columns = _Columns(self.engine, user, groups)
            spliced = self._partition_columns.filter(reply.message, columns)
            if spliced is not None:
                if columns.hidden:
                    self._decisions["columns_hidden"].inc(len(columns.hidden))
                    exchange.event.policy_columns_hidden = len(columns.hidden)
                    reply.message = spliced
                return
        if name in _LISTINGS:
            self._filter_names(exchange, reply, user, groups)
            return
        result = reply.result
        if result.success is None:
            return  # HMS answered with a declared exception
        changed = False
        if name in _OBJECT_LISTINGS:
            changed = self._filter_objects(exchange, result, user, groups)
        if name in _COLUMN_REPLIES:
            columns = _Columns(self.engine, user, groups)
            self._filter_columns(exchange, name, result, columns)
            if columns.hidden:
                self._decisions["columns_hidden"].inc(len(columns.hidden))
                exchange.event.policy_columns_hidden = len(columns.hidden)
                changed = True
        if changed:
            reply.replace(result)

    def _filter_names(self, exchange: Exchange, reply: Reply, user: str, groups: frozenset[str]) -> None:
        """A name listing (``list<string>``) keeps the names the user may see, in order. When the
        policies decide alike for every name (:meth:`PolicyEngine.listing_verdict`), the reply is
        not decoded: kept as it is, or answered with an empty list. A name that is not UTF-8
        (thriftpy2 gives it as bytes) is judged as its surrogate-escaped text."""
        name = reply.header.name
        db_arg = _LISTINGS[name]
        database = None if db_arg is None else (
            getattr(decode_args(exchange.call, self.schema.methods[name]), db_arg) or "")
        verdict = self.engine.listing_verdict(user, groups, database)
        count = None if verdict is None else _listing_count(reply.message)
        if count is not None:
            if self._count_hidden(exchange, count, 0 if verdict else count):
                reply.replace(self.schema.methods[name].result_class(success=[]))  # type: ignore[misc]
            return
        result = reply.result
        if result.success is None:
            return  # HMS answered with a declared exception

        def visible(names: list) -> list:
            if database is None:
                return self.engine.visible_databases(user, groups, names)
            return self.engine.visible_tables(user, groups, database, names)
        names = result.success
        try:
            shown = visible(names)
        except TypeError:  # a bytes name: the engine joins text
            text = [n.decode("utf-8", "surrogateescape") if isinstance(n, bytes) else n for n in names]
            original = dict(zip(text, names))
            shown = [original[n] for n in visible(text)]
        if self._hide(exchange, result, "success", names, shown):
            reply.replace(result)

    def _filter_objects(self, exchange: Exchange, result, user: str, groups: frozenset[str]) -> bool:
        path, db_attr, table_attr = _OBJECT_LISTINGS[exchange.header.name]  # type: ignore[union-attr]
        holder_path, _, attr = path.rpartition(".")
        holder = _argument(result, holder_path) if holder_path else result
        if holder is None or getattr(holder, attr) is None:
            return False
        items = list(getattr(holder, attr))
        if table_attr is None:
            shown = [i for i in items if self.engine.visible(user, groups, getattr(i, db_attr) or "")]
        else:
            shown = [i for i in items if self.engine.visible(
                user, groups, getattr(i, db_attr) or "", getattr(i, table_attr) or "")]
        return self._hide(exchange, holder, attr, items, shown)

    def _hide(self, exchange: Exchange, holder, attr: str, items: list, shown: list) -> bool:
        """Replace the listing ``items`` (``holder.attr``) by ``shown``, counting what was hidden."""
        if not self._count_hidden(exchange, len(items), len(items) - len(shown)):
            return False
        setattr(holder, attr, shown)
        return True

    def _count_hidden(self, exchange: Exchange, total: int, hidden: int) -> bool:
        """Record on the audit event and the metrics that a listing of ``total`` items loses
        ``hidden``; whether it loses any."""
        exchange.event.policy_decision = "allowed"
        exchange.event.policy_access = "_any"
        exchange.event.policy_hidden = hidden
        if not hidden:
            return False
        self._decisions["hidden"].inc(hidden)
        exchange.event.reason = f"catalog policy hid {hidden} of {total}"
        return True

    def _filter_columns(self, exchange: Exchange, name: str, result, columns: _Columns) -> None:
        """Remove the denied columns from ``result`` (the reply of ``name``, one of _READS)."""
        success = result.success
        kind = type(success).__name__ if not isinstance(success, list) else (
            type(success[0]).__name__ if success else "")
        items = success if isinstance(success, list) else [success]
        if not kind:
            return
        if kind == "Table":
            for table in items:
                columns.table(table)
        elif kind == "Partition":
            for part in items:
                columns.partition(part)
        elif kind == "PartitionSpec":
            for spec in items:
                columns.partition_spec(spec)
        elif kind == "GetTableResult":
            columns.table(success.table)
        elif kind == "GetTablesResult":
            for table in success.tables or ():
                columns.table(table)
        elif kind == "PartitionsByExprResult":
            for part in success.partitions or ():
                columns.partition(part)
        elif kind == "Index":
            for index in items:
                keep = columns.keep(index.dbName, index.origTableName)
                if keep is not None:
                    columns.sd(index.sd, keep)
        elif kind == "ColumnStatistics":
            columns.statistics(success)
        else:
            read = _READS[name]
            args = decode_args(exchange.call, self.schema.methods[name])
            keep = columns.keep(_argument(args, read.db), _argument(args, read.table) if read.table else None)
            if keep is None:
                return
            if kind == "FieldSchema":
                result.success = [f for f in success if keep(f.name)]
            elif kind == "TableStatsResult":
                success.tableStats = [o for o in success.tableStats or () if keep(o.colName)]
            elif kind == "AggrStats":
                success.colStats = [o for o in success.colStats or () if keep(o.colName)]
            elif kind == "PartitionsStatsResult":
                success.partStats = {p: [o for o in objs if keep(o.colName)]
                                     for p, objs in (success.partStats or {}).items()}
            elif kind == "PrimaryKeysResponse":
                success.primaryKeys = [k for k in success.primaryKeys or () if keep(k.column_name)]
            elif kind == "ForeignKeysResponse":
                success.foreignKeys = [k for k in success.foreignKeys or () if self._foreign_key_shown(k, columns)]

    def _foreign_key_shown(self, key, columns: _Columns) -> bool:
        """Both tables of the key visible and both of its columns kept."""
        for db, table, column in ((key.pktable_db, key.pktable_name, key.pkcolumn_name),
                                  (key.fktable_db, key.fktable_name, key.fkcolumn_name)):
            if not self.engine.visible(columns.user, columns.groups, db or "", table or ""):
                return False
            keep = columns.keep(db, table)
            if keep is not None and not keep(column or ""):
                return False
        return True

    def _missing(self, method: MethodSchema, name: str, seqid: int, how: str,
                 database: str, table: str | None, args) -> bytes:
        """HMS 2.3.10's own answer for a missing object (see :data:`_READS`)."""
        if how == "internal_error":
            return BINARY.application_exception(name, seqid, f"Internal error processing {name}", INTERNAL_ERROR)
        if how == "empty":
            return encode_reply(name, seqid, _empty_success(method))
        exception, message = {
            "no_such_database": ("NoSuchObjectException", lambda: database),
            "unknown_database": ("UnknownDBException", lambda: f"Could not find database {database}"),
            "no_such_table": ("NoSuchObjectException", lambda: f"{database}.{table} table not found"),
            "unknown_table": ("UnknownTableException", lambda: f"{database}.{table} table not found"),
            "no_such_db_table": ("NoSuchObjectException",
                                 lambda: f"Specified database/table does not exist : {database}.{table}"),
            "unknown_table_event": ("UnknownTableException", lambda: f"Table: {table} is not found."),
            "no_such_index": ("NoSuchObjectException",
                              lambda: f"{database}.{table} index={_argument(args, 'index_name')} not found"),
            "no_such_function": ("NoSuchObjectException",
                                 lambda: f"Function {database}.{_argument(args, 'funcName')} does not exist"),
        }[how]
        return _exception_reply(method, name, seqid, exception, message())

    def _refusal(self, method: MethodSchema | None, name: str, seqid: int, user: str) -> bytes:
        message = f"User {user} does not have privileges for {name}: the catalog policy of this service cannot judge it"
        return _exception_reply(method, name, seqid, "MetaException", message)


def _listing_count(message: bytes) -> int | None:
    """How many names a strict-binary REPLY of a name listing carries, read from the header of
    its ``success`` field (0, ``list<string>``) without decoding them; None when the result
    holds something else (a declared exception)."""
    at = 12 + struct.unpack_from("!i", message, 4)[0]  # version and type, name, seqid
    if message[at:at + 4] != b"\x0f\x00\x00\x0b" or len(message) < at + 8:
        return None
    count = struct.unpack_from("!i", message, at + 4)[0]
    return count if count >= 0 else None


def _exception_reply(method: MethodSchema | None, name: str, seqid: int, struct_name: str,
                     message: str) -> bytes:
    """A REPLY carrying the declared exception ``struct_name`` with ``message``; a
    ``TApplicationException`` (INTERNAL_ERROR) when the method declares none."""
    declared = _declared(method, struct_name)
    if declared is None:
        return BINARY.application_exception(name, seqid, message, INTERNAL_ERROR)
    field, cls = declared
    result = method.result_class()  # type: ignore[union-attr, misc]
    setattr(result, field, cls(message=message))
    return encode_reply(name, seqid, result)
