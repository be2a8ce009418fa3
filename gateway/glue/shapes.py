"""Hive Metastore Thrift objects (thriftpy2 instances of the IDL's ``Table``, ``Database``,
``Partition``…) in AWS Glue's shapes (botocore ``glue/2017-03-31/service-2.json``), as JSON-ready
dicts. The mapping is the one of AWS's own Hive client (awslabs
``aws-glue-data-catalog-client-for-apache-hive-metastore``, ``HiveToCatalogConverter``), read the
other way:

* times: HMS's ``i32`` seconds since the epoch → Glue ``Timestamp`` (AWS JSON 1.1 writes
  timestamps as epoch seconds); a zero HMS time (never set) is left out;
* ``FieldSchema`` → ``Column`` (``Name``, ``Type``, ``Comment``);
* ``SkewedInfo``'s ``list<string>`` values → one string each, every item as ``<length>$<item>``
  (the awslabs client's encoding), for ``SkewedColumnValues`` and the keys of
  ``SkewedColumnValueLocationMaps``;
* a database's or table's ``comment`` parameter → ``Description`` too (Glue keeps it apart).

Absent (None) members are left out, as Glue leaves them out. ``columns``, when given, keeps
only the storage descriptor's columns of those names (a caller's authorized columns).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

Shape = dict[str, Any]


def _put(out: Shape, key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _time(seconds: int | None) -> int | None:
    return seconds or None  # HMS writes 0 for "never"


def encode_list(items: list[str]) -> str:
    """``["a", "bc"]`` → ``"1$a2$bc"`` (awslabs' ``convertListToString``): unambiguous for any
    item text, since each item is preceded by its length."""
    return "".join(f"{len(item)}${item}" for item in items)


def column(field) -> Shape:
    """A ``FieldSchema`` as a Glue ``Column``."""
    out: Shape = {"Name": field.name}
    _put(out, "Type", field.type)
    _put(out, "Comment", field.comment)
    return out


def columns(fields, keep: Container[str] | None = None) -> list[Shape]:
    """``FieldSchema`` list → ``Column`` list; with ``keep``, only columns whose lower-cased name
    is in it (Hive column names are case-insensitive)."""
    return [column(f) for f in fields or () if keep is None or f.name.lower() in keep]


def serde_info(serde) -> Shape:
    out: Shape = {}
    _put(out, "Name", serde.name)
    _put(out, "SerializationLibrary", serde.serializationLib)
    _put(out, "Parameters", serde.parameters)
    return out


def skewed_info(skewed) -> Shape:
    out: Shape = {}
    _put(out, "SkewedColumnNames", skewed.skewedColNames)
    if skewed.skewedColValues is not None:
        out["SkewedColumnValues"] = [encode_list(v) for v in skewed.skewedColValues]
    if skewed.skewedColValueLocationMaps is not None:
        out["SkewedColumnValueLocationMaps"] = {
            encode_list(list(k)): v for k, v in skewed.skewedColValueLocationMaps.items()}
    return out


def storage_descriptor(sd, keep: Container[str] | None = None, *, with_columns: bool = True) -> Shape:
    """A ``StorageDescriptor``; ``keep`` as in :func:`columns`; ``with_columns=False`` leaves
    ``Columns`` out (``GetPartitions``' ``ExcludeColumnSchema``)."""
    out: Shape = {}
    if with_columns:
        out["Columns"] = columns(sd.cols, keep)
    _put(out, "Location", sd.location)
    _put(out, "InputFormat", sd.inputFormat)
    _put(out, "OutputFormat", sd.outputFormat)
    _put(out, "Compressed", sd.compressed)
    _put(out, "NumberOfBuckets", sd.numBuckets)
    if sd.serdeInfo is not None:
        out["SerdeInfo"] = serde_info(sd.serdeInfo)
    _put(out, "BucketColumns", sd.bucketCols)
    if sd.sortCols is not None:
        out["SortColumns"] = [{"Column": o.col, "SortOrder": o.order} for o in sd.sortCols]
    _put(out, "Parameters", sd.parameters)
    if sd.skewedInfo is not None:
        out["SkewedInfo"] = skewed_info(sd.skewedInfo)
    _put(out, "StoredAsSubDirectories", sd.storedAsSubDirectories)
    return out


def table(t, catalog_id: str, keep: Container[str] | None = None, *,
          lake_formation: bool = False) -> Shape:
    """An HMS ``Table`` as a Glue ``Table``. ``keep``: the data columns to show (None: all);
    ``lake_formation``: ``IsRegisteredWithLakeFormation`` (a catalog policy governs it)."""
    out: Shape = {"Name": t.tableName}
    _put(out, "DatabaseName", t.dbName)
    _put(out, "Description", (t.parameters or {}).get("comment"))
    _put(out, "Owner", t.owner)
    _put(out, "CreateTime", _time(t.createTime))
    _put(out, "LastAccessTime", _time(t.lastAccessTime))
    _put(out, "Retention", t.retention)
    if t.sd is not None:
        out["StorageDescriptor"] = storage_descriptor(t.sd, keep)
    out["PartitionKeys"] = columns(t.partitionKeys)
    _put(out, "ViewOriginalText", t.viewOriginalText)
    _put(out, "ViewExpandedText", t.viewExpandedText)
    _put(out, "TableType", t.tableType)
    _put(out, "Parameters", t.parameters)
    out["IsRegisteredWithLakeFormation"] = lake_formation
    out["CatalogId"] = catalog_id
    return out


def database(d, catalog_id: str) -> Shape:
    """An HMS ``Database`` as a Glue ``Database``."""
    out: Shape = {"Name": d.name}
    _put(out, "Description", d.description)
    _put(out, "LocationUri", d.locationUri)
    _put(out, "Parameters", d.parameters)
    out["CatalogId"] = catalog_id
    return out


def partition(p, catalog_id: str, keep: Container[str] | None = None, *,
              with_columns: bool = True) -> Shape:
    """An HMS ``Partition`` as a Glue ``Partition``; ``keep`` and ``with_columns`` as in
    :func:`storage_descriptor`."""
    out: Shape = {"Values": list(p.values or ())}
    _put(out, "DatabaseName", p.dbName)
    _put(out, "TableName", p.tableName)
    _put(out, "CreationTime", _time(p.createTime))
    _put(out, "LastAccessTime", _time(p.lastAccessTime))
    if p.sd is not None:
        out["StorageDescriptor"] = storage_descriptor(p.sd, keep, with_columns=with_columns)
    _put(out, "Parameters", p.parameters)
    out["CatalogId"] = catalog_id
    return out
