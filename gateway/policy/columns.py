"""Columns a user may not see, removed from HMS's objects (thriftpy2 ``Table``, ``Partition``,
``PartitionSpec``, ``Index``, ``FieldSchema`` lists, column statistics, key constraints) as a
:class:`~gateway.policy.view.CatalogView` keeps them (:func:`filter_result`), and from the
column names that hide in table and partition properties (:func:`filter_parameters`):

* Spark data-source tables keep their schema as JSON in ``spark.sql.sources.schema`` (Spark
  3.4+), or split in ``spark.sql.sources.schema.numParts`` + ``.part.<i>`` (Spark 2.x-3.3;
  ``HiveExternalCatalog.tableMetaToTableProps``, parts of at most
  ``spark.sql.sources.schema.stringLengthThreshold`` = 4000 characters);
* Spark's column statistics: ``spark.sql.statistics.colStats.<column>.<stat>``;
* Hive's ``COLUMN_STATS_ACCURATE``: JSON ``{"BASIC_STATS": "true", "COLUMN_STATS": {<column>: "true"}}``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.policy.view import CatalogView, Keep

SCHEMA = "spark.sql.sources.schema"
NUM_PARTS = "spark.sql.sources.schema.numParts"
PART = "spark.sql.sources.schema.part."
COL_STATS = "spark.sql.statistics.colStats."
STATS_ACCURATE = "COLUMN_STATS_ACCURATE"
#: Spark's default ``spark.sql.sources.schema.stringLengthThreshold``.
PART_LENGTH = 4000


def filter_parameters(parameters: dict[str, str] | None, keep: Keep) -> dict[str, str] | None:
    """``parameters`` (a ``Table``/``Partition`` parameter map) without the denied columns:
    ``keep(name)`` says whether a column stays. Returns the same dict when nothing names a
    column; values that do not parse as the JSON expected are dropped (fail closed)."""
    if not parameters:
        return parameters
    touched = (SCHEMA in parameters or NUM_PARTS in parameters or STATS_ACCURATE in parameters
               or any(k.startswith(COL_STATS) for k in parameters))
    if not touched:
        return parameters
    out = {k: v for k, v in parameters.items()
           if not (k.startswith(COL_STATS) and not keep(k[len(COL_STATS):].rpartition(".")[0]))}
    _filter_spark_schema(out, keep)
    if STATS_ACCURATE in out:
        try:
            accurate = json.loads(out[STATS_ACCURATE])
            stats = accurate.get("COLUMN_STATS")
            if isinstance(stats, dict):
                accurate["COLUMN_STATS"] = {c: v for c, v in stats.items() if keep(c)}
            out[STATS_ACCURATE] = json.dumps(accurate, separators=(",", ":"))
        except (ValueError, AttributeError):
            del out[STATS_ACCURATE]
    return out


def _filter_spark_schema(params: dict[str, str], keep: Keep) -> None:
    if SCHEMA in params:
        text, split = params[SCHEMA], False
    elif NUM_PARTS in params:
        try:
            count = int(params[NUM_PARTS])
            text, split = "".join(params[f"{PART}{i}"] for i in range(count)), True
        except (ValueError, KeyError):
            text, split = "", True
    else:
        return
    for key in [k for k in params if k == NUM_PARTS or k.startswith(PART)]:
        del params[key]
    params.pop(SCHEMA, None)
    try:
        schema = json.loads(text)
        schema["fields"] = [f for f in schema["fields"] if keep(f["name"])]
    except (ValueError, KeyError, TypeError):
        return  # not Spark's schema JSON: dropped rather than passed on unfiltered
    text = json.dumps(schema, separators=(",", ":"))
    if not split:
        params[SCHEMA] = text
        return
    parts = [text[i:i + PART_LENGTH] for i in range(0, len(text), PART_LENGTH)] or [""]
    params[NUM_PARTS] = str(len(parts))
    for i, part in enumerate(parts):
        params[f"{PART}{i}"] = part


# --- HMS's objects ---------------------------------------------------------------------------

def filter_result(view: "CatalogView", success, named: tuple[str | None, str | None] = (None, None)):
    """``success`` (the ``success`` of an HMS read's reply) without the columns ``view`` does
    not keep; objects are changed in place. ``named``: the (database, table) the call named,
    for replies whose objects do not name their table (``FieldSchema`` lists, statistics
    results, primary keys). Returns the value to put back as ``success`` (a new list for
    ``list<FieldSchema>``, else ``success`` itself). Partition keys stay: partition values and
    names carry them."""
    items = success if isinstance(success, list) else [success]
    kind = type(items[0]).__name__ if items else ""
    if kind == "Table":
        for table in items:
            filter_table(view, table)
    elif kind == "Partition":
        for part in items:
            filter_partition(view, part)
    elif kind == "PartitionSpec":
        for spec in items:
            _partition_spec(view, spec)
    elif kind == "GetTableResult":
        filter_table(view, success.table)
    elif kind == "GetTablesResult":
        for table in success.tables or ():
            filter_table(view, table)
    elif kind == "PartitionsByExprResult":
        for part in success.partitions or ():
            filter_partition(view, part)
    elif kind == "Index":
        for index in items:
            keep = view.keep(index.dbName, index.origTableName)
            if keep is not None:
                _sd(index.sd, keep)
    elif kind == "ColumnStatistics":
        desc = success.statsDesc
        keep = view.keep(desc.dbName if desc else None, desc.tableName if desc else None)
        if keep is not None and success.statsObj:
            success.statsObj = [o for o in success.statsObj if keep(o.colName)]
    elif kind == "ForeignKeysResponse":
        success.foreignKeys = [k for k in success.foreignKeys or () if _foreign_key_shown(view, k)]
    elif kind:
        keep = view.keep(*named)
        if keep is None:
            return success
        if kind == "FieldSchema":
            return [f for f in success if keep(f.name)]
        if kind == "TableStatsResult":
            success.tableStats = [o for o in success.tableStats or () if keep(o.colName)]
        elif kind == "AggrStats":
            success.colStats = [o for o in success.colStats or () if keep(o.colName)]
        elif kind == "PartitionsStatsResult":
            success.partStats = {p: [o for o in objs if keep(o.colName)]
                                 for p, objs in (success.partStats or {}).items()}
        elif kind == "PrimaryKeysResponse":
            success.primaryKeys = [k for k in success.primaryKeys or () if keep(k.column_name)]
    return success


def filter_table(view: "CatalogView", table) -> None:
    """A ``Table``'s data columns and column-bearing parameters, as ``view`` keeps them."""
    keep = view.keep(table.dbName, table.tableName)
    if keep is not None:
        _sd(table.sd, keep)
        table.parameters = filter_parameters(table.parameters, keep)


def filter_partition(view: "CatalogView", part, keep: Keep | None = None) -> None:
    """A ``Partition``'s columns (and Hive's ``COLUMN_STATS_ACCURATE``), by ``keep`` or as
    ``view`` keeps its table's."""
    keep = keep or view.keep(part.dbName, part.tableName)
    if keep is not None:
        _sd(part.sd, keep)
        if part.parameters and STATS_ACCURATE in part.parameters:
            part.parameters = filter_parameters(part.parameters, keep)


def _partition_spec(view: "CatalogView", spec) -> None:
    keep = view.keep(spec.dbName, spec.tableName)
    if keep is None:
        return
    if spec.sharedSDPartitionSpec is not None:
        _sd(spec.sharedSDPartitionSpec.sd, keep)
    if spec.partitionList is not None:
        for part in spec.partitionList.partitions or ():
            filter_partition(view, part, keep)


def _sd(sd, keep: Keep) -> None:
    if sd is not None and sd.cols:
        sd.cols = [c for c in sd.cols if keep(c.name)]


def _foreign_key_shown(view: "CatalogView", key) -> bool:
    """Both tables of the key visible and both of its columns kept."""
    for db, table, column in ((key.pktable_db, key.pktable_name, key.pkcolumn_name),
                              (key.fktable_db, key.fktable_name, key.fkcolumn_name)):
        if not view.visible(db or "", table or ""):
            return False
        keep = view.keep(db, table)
        if keep is not None and not keep(column or ""):
            return False
    return True
