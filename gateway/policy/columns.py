"""Column names that hide in table and partition properties, removed for a user who may not
see those columns.

* Spark data-source tables keep their schema as JSON in ``spark.sql.sources.schema`` (Spark
  3.4+), or split in ``spark.sql.sources.schema.numParts`` + ``.part.<i>`` (Spark 2.x-3.3;
  ``HiveExternalCatalog.tableMetaToTableProps``, parts of at most
  ``spark.sql.sources.schema.stringLengthThreshold`` = 4000 characters);
* Spark's column statistics: ``spark.sql.statistics.colStats.<column>.<stat>``;
* Hive's ``COLUMN_STATS_ACCURATE``: JSON ``{"BASIC_STATS": "true", "COLUMN_STATS": {<column>: "true"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

SCHEMA = "spark.sql.sources.schema"
NUM_PARTS = "spark.sql.sources.schema.numParts"
PART = "spark.sql.sources.schema.part."
COL_STATS = "spark.sql.statistics.colStats."
STATS_ACCURATE = "COLUMN_STATS_ACCURATE"
#: Spark's default ``spark.sql.sources.schema.stringLengthThreshold``.
PART_LENGTH = 4000

Keep = Callable[[str], bool]


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
