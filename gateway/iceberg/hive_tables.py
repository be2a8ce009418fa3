"""Iceberg tables as HMS tables, built exactly as Iceberg's ``HiveCatalog`` builds them
(PyIceberg ``pyiceberg/catalog/hive.py``: ``_convert_iceberg_into_hive``, ``commit_table``),
as thriftpy2 objects of the gateway's IDL (``MetastoreClient.idl``):

* ``tableType=EXTERNAL_TABLE``, parameters ``EXTERNAL=TRUE``, ``table_type=ICEBERG``,
  ``metadata_location`` (and ``previous_metadata_location`` after a commit), plus the Iceberg
  table properties (PyIceberg's ``_construct_parameters``);
* the storage descriptor: the table location, Hive column types of the current schema
  (PyIceberg's ``SchemaToHiveConverter``), ``FileInputFormat``/``FileOutputFormat`` and
  ``LazySimpleSerDe``, as PyIceberg writes them.
"""

from __future__ import annotations

import time
from typing import Any

from pyiceberg.catalog.hive import SchemaToHiveConverter, _construct_parameters
from pyiceberg.schema import Schema, visit
from pyiceberg.table.metadata import TableMetadata

from gateway.lakehouse.table_parameters import ICEBERG, METADATA_LOCATION, PREVIOUS_METADATA_LOCATION, TABLE_TYPE

#: The ``EnvironmentContext`` of a commit's ``alter_table``: HMS must not scan the location
#: for statistics (Iceberg's HiveTableOperations, PyIceberg's HiveCatalog).
COMMIT_CONTEXT = {"DO_NOT_UPDATE_STATS": "true"}


ICEBERG_VIEW, VIRTUAL_VIEW = "ICEBERG-VIEW", "VIRTUAL_VIEW"
_HMS_OWNER, _CURRENT_SCHEMA, _STORAGE_HANDLER = "hive.metastore.table.owner", "current-schema", "storage_handler"
_MAX_PARAMETER = 32672  # Java's iceberg.hive.table-property-max-size default
#: The one ``storage_handler`` a table commit keeps: Iceberg's own, which Java clients with
#: ``engine.hive.enabled`` set so that Hive can query the table.
ICEBERG_STORAGE_HANDLER = "org.apache.iceberg.mr.hive.HiveIcebergStorageHandler"


def is_iceberg_view(table: Any) -> bool:
    """Whether an HMS ``Table`` is an Iceberg view (``VIRTUAL_VIEW`` with ``table_type``
    ``ICEBERG-VIEW``, any case: Java's ``validateTableIsIcebergView``)."""
    return ((table.tableType or "").upper() == VIRTUAL_VIEW
            and (table.parameters or {}).get(TABLE_TYPE, "").upper() == ICEBERG_VIEW)


def is_iceberg(table: Any) -> bool:
    """Whether an HMS ``Table`` is an Iceberg table (``table_type`` ``ICEBERG``, any case)."""
    return (table.parameters or {}).get(TABLE_TYPE, "").lower() == ICEBERG


def metadata_location(table: Any) -> str | None:
    """The ``metadata_location`` parameter of an HMS ``Table`` (None when it has none)."""
    return (table.parameters or {}).get(METADATA_LOCATION) or None


def storage_descriptor(idl, schema: Schema, location: str, hive2_compatible: bool) -> Any:
    """The ``StorageDescriptor`` of an Iceberg table with ``schema`` at ``location``."""
    converter = SchemaToHiveConverter(hive2_compatible)
    return idl.StorageDescriptor(
        cols=[idl.FieldSchema(name=f.name, type=visit(f.field_type, converter), comment=f.doc)
              for f in schema.fields],
        location=location,
        inputFormat="org.apache.hadoop.mapred.FileInputFormat",
        outputFormat="org.apache.hadoop.mapred.FileOutputFormat",
        compressed=False, numBuckets=-1,
        serdeInfo=idl.SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                                parameters={}),
        bucketCols=[], sortCols=[], parameters={},
    )


def new_table(idl, db: str, name: str, owner: str, metadata: TableMetadata, location: str,
              hive2_compatible: bool) -> Any:
    """The HMS ``Table`` of a new Iceberg table whose metadata file is ``location``."""
    now = int(time.time())
    return idl.Table(
        tableName=name, dbName=db, owner=owner, createTime=now, lastAccessTime=now, retention=0,
        sd=storage_descriptor(idl, metadata.schema(), metadata.location, hive2_compatible),
        partitionKeys=[], tableType="EXTERNAL_TABLE",
        parameters=_construct_parameters(metadata_location=location, metadata_properties=metadata.properties),
    )


def committed_table(idl, table: Any, base: TableMetadata, base_location: str,
                    new: TableMetadata, new_location: str, hive2_compatible: bool) -> Any:
    """``table`` (the HMS ``Table`` read under the lock) after a commit from ``base`` to ``new``:
    parameters set outside Iceberg are kept (but a ``storage_handler`` other than
    :data:`ICEBERG_STORAGE_HANDLER`), Iceberg properties the commit removed are removed, the new
    ones and the locations set; the columns follow the new schema."""
    parameters = dict(table.parameters or {})
    for key in base.properties.keys() - new.properties.keys():
        parameters.pop(key, None)
    parameters.update(_construct_parameters(metadata_location=new_location,
                                            previous_metadata_location=base_location,
                                            metadata_properties=new.properties))
    # Hive loads the class this names. Clients may not set it (implementations.py), but a Thrift
    # client may have. Java's HiveTableOperations sets Iceberg's or removes it on every commit.
    if parameters.get(_STORAGE_HANDLER) != ICEBERG_STORAGE_HANDLER:
        parameters.pop(_STORAGE_HANDLER, None)
    table.parameters = parameters
    table.sd = storage_descriptor(idl, new.schema(), new.location, hive2_compatible)
    return table


def _view_parameters(parameters: dict, view: Any, location: str, previous: str | None, removed=()) -> dict:
    parameters = dict(parameters)
    parameters.update({k: v for k, v in view.properties.items() if k.lower() != _HMS_OWNER})
    parameters["uuid"] = view.view_uuid
    for key in removed:
        parameters.pop(key, None)
    parameters[TABLE_TYPE] = ICEBERG_VIEW
    parameters[METADATA_LOCATION] = location
    if previous:
        parameters[PREVIOUS_METADATA_LOCATION] = previous
    parameters.pop(_STORAGE_HANDLER, None)
    parameters.pop(_CURRENT_SCHEMA, None)
    schema = view_schema(view).model_dump_json()
    if len(schema) <= _MAX_PARAMETER:
        parameters[_CURRENT_SCHEMA] = schema
    return parameters


def view_schema(view: Any) -> Schema:
    """The schema of a view's current version (``ViewMetadata``)."""
    version = next(v for v in view.versions if v.version_id == view.current_version_id)
    return next(s for s in view.schemas if s.schema_id == version.schema_id)


def new_view_table(idl, db: str, name: str, owner: str, view: Any, location: str, hive2_compatible: bool) -> Any:
    """The HMS ``Table`` of a new Iceberg view (``ViewMetadata`` ``view``) whose metadata file
    is ``location``."""
    now = int(time.time())
    return idl.Table(
        tableName=name, dbName=db, owner=owner, createTime=now, lastAccessTime=now, retention=2147483647,
        sd=storage_descriptor(idl, view_schema(view), view.location, hive2_compatible),
        partitionKeys=[], tableType=VIRTUAL_VIEW, parameters=_view_parameters({}, view, location, None),
    )


def committed_view_table(idl, table: Any, base: Any, base_location: str, new: Any, new_location: str,
                         hive2_compatible: bool) -> Any:
    """``table`` (the view's HMS ``Table`` read under the lock) after a commit from ``base`` to
    ``new``: parameters set outside Iceberg kept, removed view properties removed."""
    removed = base.properties.keys() - new.properties.keys()
    table.parameters = _view_parameters(table.parameters or {}, new, new_location, base_location, removed)
    table.sd = storage_descriptor(idl, view_schema(new), new.location, hive2_compatible)
    return table
