"""Catalog crawl through a ``ThriftHiveMetastore`` client, independent of Spark: how the work is
split (:func:`plan`: batches of one database's tables, one call each; :func:`plan_partitions`:
those batches dealt into a few balanced input partitions) and the rows of one batch
(:func:`rows`) or of one input partition (:func:`partition_rows`, several calls in flight). The
PySpark data source runs :func:`plan_partitions` on the driver and :func:`partition_rows` on the
executors.

Calls used (Hive 2.3 IDL): ``get_databases(pattern)``, ``get_tables(db, pattern)``,
``get_database``, ``get_table_objects_by_name(db, names)`` (one call per batch of tables; where
the service does not expose it, ``get_table`` per table), ``get_partition_names`` (partition
counts) and ``get_partitions`` (the ``partitions`` view). All but ``get_table_objects_by_name``
are among the spec's nine read methods, a gateway service's default.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import groupby

from thriftpy2.thrift import TApplicationException

from hms_gateway_client.connection import hive_metastore_idl
from hms_gateway_client.partition_names import partition_name

__all__ = ["SCHEMAS", "VIEWS", "Batch", "partition_rows", "plan", "plan_partitions", "rows"]

_PARAMS = "parameters map<string,string>"
#: view name → Spark DDL schema of its rows (times are HMS's own: seconds since the epoch).
SCHEMAS = {
    "databases": f"database string, description string, location string, owner string, owner_type string, {_PARAMS}",
    "tables": (
        "database string, table string, owner string, table_type string, create_time bigint, "
        "last_access_time bigint, location string, input_format string, output_format string, "
        "serde string, partition_keys array<string>, num_columns int, num_partitions int, "
        f"num_rows bigint, total_size bigint, has_statistics boolean, {_PARAMS}"
    ),
    "partitions": (
        "database string, table string, name string, values array<string>, location string, "
        f"create_time bigint, num_rows bigint, {_PARAMS}"
    ),
    "columns": (
        "database string, table string, position int, column string, type string, comment string, "
        "is_partition_key boolean"
    ),
}
VIEWS = tuple(SCHEMAS)
# Table parameters that mean basic statistics were gathered (Hive's StatsSetupConst, Spark's
# ANALYZE TABLE / CTAS).
_ROW_COUNT_KEYS = ("numRows", "spark.sql.statistics.numRows")
_SIZE_KEYS = ("totalSize", "spark.sql.statistics.totalSize")


@dataclass(frozen=True)
class Batch:
    """One piece of a crawl: ``database`` and, except for the ``databases`` view, up to
    ``batch_size`` of its ``tables``. Pickles (a Spark input partition carries one)."""

    database: str
    tables: tuple[str, ...] = ()


def plan(client, view: str, *, database: str = "*", table: str = "*", batch_size: int = 100) -> list[Batch]:
    """The batches of a crawl of ``view`` (one of :data:`VIEWS`).

    ``database`` and ``table`` are HMS name patterns (``*`` any characters, ``|`` alternatives).
    ``databases``: one batch per database; other views: each database's matching tables, in
    name order, cut into batches of ``batch_size``. Costs one ``get_databases`` and, except for
    ``databases``, one ``get_tables`` per database. Raises ValueError for an unknown view or a
    ``batch_size`` below 1, and whatever the client raises.
    """
    if view not in SCHEMAS:
        raise ValueError(f"unknown view {view!r}: one of {', '.join(VIEWS)}")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if view == "databases":
        return [Batch(db) for db in sorted(client.get_databases(database))]
    return _cut(_names(client, database, table), batch_size)


def plan_partitions(client, view: str, *, database: str = "*", table: str = "*", partitions: int = 4,
                    batch_size: int = 100) -> list[tuple[Batch, ...]]:
    """The input partitions of a crawl of ``view``: at most ``partitions`` of them, each a tuple
    of batches (one call each) holding a contiguous, near-equal share (±1) of all the matching
    tables in (database, table) name order, so a partition spans few databases and its batches
    are as large as ``batch_size`` allows; ``databases``: a near-equal share of the databases.
    Fewer, larger partitions cost Spark less (about 0.1 s per Python task). No partition is
    empty: an empty catalog gives ``[]``. Same calls and errors as :func:`plan`, and ValueError
    for ``partitions`` below 1.
    """
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    if view == "databases":
        databases = [b.database for b in plan(client, view, database=database)]
        return [tuple(Batch(db) for db in share) for share in _shares(databases, partitions)]
    if view not in SCHEMAS:
        raise ValueError(f"unknown view {view!r}: one of {', '.join(VIEWS)}")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    return [tuple(_cut(share, batch_size)) for share in _shares(_names(client, database, table), partitions)]


def _names(client, database: str, table: str) -> list[tuple[str, str]]:
    """(database, table) of every matching table, sorted: one ``get_tables`` per database."""
    return [(db, t) for db in sorted(client.get_databases(database)) for t in sorted(client.get_tables(db, table))]


def _shares(items: list, count: int) -> list[list]:
    """``items`` cut into at most ``count`` contiguous runs whose lengths differ by at most one."""
    count = min(count, len(items))
    size, extra = divmod(len(items), count) if count else (0, 0)
    shares, start = [], 0
    for i in range(count):
        end = start + size + (i < extra)
        shares.append(items[start:end])
        start = end
    return shares


def _cut(names: list[tuple[str, str]], batch_size: int) -> list[Batch]:
    """Sorted (database, table) pairs as batches of up to ``batch_size`` tables of one database."""
    batches = []
    for db, group in groupby(names, key=lambda n: n[0]):
        tables = [t for _, t in group]
        batches += [Batch(db, tuple(tables[i:i + batch_size])) for i in range(0, len(tables), batch_size)]
    return batches


def partition_rows(connect: Callable[[], object], view: str, batches: Sequence[Batch], *,
                   threads: int = 1) -> Iterator[tuple]:
    """The rows of ``view`` for the batches of one input partition, in batch order, as
    :func:`rows` gives them. ``connect()`` returns a new client (a context manager); up to
    ``threads`` calls are in flight, each thread on its own kept-alive connection (HTTP/1.1
    has one call at a time per connection). Where the service does not expose
    ``get_table_objects_by_name`` (learnt from the first batch), the rest is fetched with
    ``get_table`` per table, one table per task, so those calls overlap too. Raises what
    :func:`rows` raises.
    """
    if not batches:
        return
    if threads <= 1:
        with connect() as client:
            for batch in batches:
                yield from rows(client, view, batch)
        return
    local, opened, lock = threading.local(), [], threading.Lock()

    def client():
        if not hasattr(local, "client"):
            local.client = connect()
            with lock:
                opened.append(local.client)
        return local.client

    pool = ThreadPoolExecutor(threads)
    try:
        first, rest = [], list(batches)
        if view != "databases" and rest and len(rest[0].tables) > 1:
            got = _table_objects(client(), rest[0])  # learns whether the batch call is exposed
            if got is None:
                rest = [Batch(b.database, (t,)) for b in rest for t in b.tables]
            else:
                first = got
                rest.pop(0)
        fetched = pool.map(lambda b: list(rows(client(), view, b)), rest)  # all submitted now
        for t in sorted(first, key=lambda t: t.tableName):
            yield from _view_rows(client(), view, t)
        for got in fetched:
            yield from got
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for c in opened:
            c.close()


def rows(client, view: str, batch: Batch) -> Iterator[tuple]:
    """The rows of ``view`` for ``batch``, as tuples in :data:`SCHEMAS` order.

    A table dropped since :func:`plan` is left out (HMS leaves it out of
    ``get_table_objects_by_name``); a database dropped since then raises the IDL's
    ``NoSuchObjectException``.
    """
    if view == "databases":
        d = client.get_database(batch.database)
        yield (d.name, d.description, d.locationUri, d.ownerName, _owner_type_name(d.ownerType),
               dict(d.parameters or {}))
        return
    for t in sorted(_tables(client, batch), key=lambda t: t.tableName):
        yield from _view_rows(client, view, t)


def _view_rows(client, view: str, t) -> Iterator[tuple]:
    if view == "tables":
        yield _table_row(client, t)
    elif view == "columns":
        yield from _column_rows(t)
    else:
        yield from _partition_rows(client, t)


_NOT_BATCHED = "_hms_crawl_not_batched"  # set on a client whose service lacks the batch call


def _table_objects(client, batch: Batch) -> list | None:
    """``get_table_objects_by_name`` for the batch; None when the service does not expose it."""
    if getattr(client, _NOT_BATCHED, False):
        return None
    try:
        return client.get_table_objects_by_name(batch.database, list(batch.tables)) or []
    except TApplicationException as exc:
        if exc.type != TApplicationException.UNKNOWN_METHOD:
            raise
    setattr(client, _NOT_BATCHED, True)
    return None


def _tables(client, batch: Batch) -> list:
    """The batch's ``Table`` objects: one ``get_table_objects_by_name`` call, or one
    ``get_table`` per table when the service does not expose it (the spec's nine methods;
    remembered on the client, so it is asked once per connection)."""
    if len(batch.tables) > 1:
        got = _table_objects(client, batch)
        if got is not None:
            return got
    missing = hive_metastore_idl().NoSuchObjectException
    tables = []
    for name in batch.tables:
        try:
            tables.append(client.get_table(batch.database, name))
        except missing:  # dropped since the plan
            continue
    return tables


def _owner_type_name(value: int | None) -> str | None:
    if value is None:
        return None
    return hive_metastore_idl().PrincipalType._VALUES_TO_NAMES.get(value, str(value))


def _first_int(params: dict, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        try:
            return int(params[key])
        except (KeyError, ValueError):
            continue
    return None


def _table_row(client, t) -> tuple:
    params = dict(t.parameters or {})
    sd = t.sd
    keys = [k.name for k in t.partitionKeys or []]
    num_partitions = len(client.get_partition_names(t.dbName, t.tableName, -1)) if keys else None
    num_rows = _first_int(params, _ROW_COUNT_KEYS)
    return (
        t.dbName, t.tableName, t.owner, t.tableType, t.createTime, t.lastAccessTime,
        sd.location if sd else None, sd.inputFormat if sd else None, sd.outputFormat if sd else None,
        sd.serdeInfo.serializationLib if sd and sd.serdeInfo else None,
        keys, len(sd.cols or []) if sd else 0, num_partitions,
        num_rows, _first_int(params, _SIZE_KEYS), num_rows is not None, params,
    )


def _column_rows(t) -> Iterator[tuple]:
    columns = [(c, False) for c in (t.sd.cols if t.sd else None) or []]
    columns += [(c, True) for c in t.partitionKeys or []]
    for position, (c, is_key) in enumerate(columns):
        yield (t.dbName, t.tableName, position, c.name, c.type, c.comment, is_key)


def _partition_rows(client, t) -> Iterator[tuple]:
    keys = [k.name for k in t.partitionKeys or []]
    if not keys:
        return
    for p in client.get_partitions(t.dbName, t.tableName, -1):
        params = dict(p.parameters or {})
        yield (t.dbName, t.tableName, partition_name(keys, p.values), list(p.values),
               p.sd.location if p.sd else None, p.createTime, _first_int(params, _ROW_COUNT_KEYS), params)
