"""An Iceberg table in a local folder, written by PyIceberg itself (metadata, manifests, Parquet
data), for unit tests and benchmarks that read one without HMS or the gateway: :func:`empty_table`
creates it, :func:`local_table` creates it and appends rows; its catalog commits by writing the
next metadata file (PyIceberg's ``update_table_metadata``) and loads the table it committed last,
nothing else."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import update_table_metadata


class _MetadataFiles(NoopCatalog):
    """Commits a table by checking the requirements and writing its next metadata file; loads
    the table it committed last (``refresh``)."""

    last: Table

    def commit_table(self, table, requirements, updates) -> CommitTableResponse:
        for requirement in requirements:
            requirement.validate(table.metadata)
        metadata = update_table_metadata(table.metadata, updates)
        location = f"{metadata.location}/metadata/{uuid.uuid4()}.metadata.json"
        ToOutputFile.table_metadata(metadata, table.io.new_output(location))
        self.last = Table(table.name(), metadata, location, table.io, self)
        return CommitTableResponse(metadata=metadata, metadata_location=location)

    def load_table(self, identifier) -> Table:
        return self.last


def empty_table(folder: Path, schema: Schema, spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
                identifier: tuple[str, str] = ("db", "t")) -> Table:
    """A table at ``folder`` with ``schema`` and ``spec`` (PyIceberg assigns fresh field ids:
    read them from ``table.schema()``), no snapshot."""
    metadata = new_table_metadata(schema, spec, UNSORTED_SORT_ORDER, folder.as_uri())
    io = PyArrowFileIO()
    location = f"{metadata.location}/metadata/{uuid.uuid4()}.metadata.json"
    ToOutputFile.table_metadata(metadata, io.new_output(location))
    catalog = _MetadataFiles("local")
    catalog.last = Table(identifier, metadata, location, io, catalog)
    return catalog.last


def local_table(folder: Path, schema: Schema, rows: list[dict], identifier: tuple[str, str] = ("db", "t")) -> Table:
    """A table at ``folder`` with ``schema`` (fresh field ids, as :func:`empty_table`) holding
    ``rows`` (one append)."""
    table = empty_table(folder, schema, identifier=identifier)
    table.append(pa.Table.from_pylist(rows, schema=table.schema().as_arrow()))
    return table
