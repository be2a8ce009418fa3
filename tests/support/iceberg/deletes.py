"""Snapshots PyIceberg 0.12 reads but does not write, for tests and benchmarks, committed through
the table's catalog (the gateway) as another engine would: row-level deletes
(:func:`commit_deletes`: PyIceberg's deletes rewrite data files; Spark's and Flink's
merge-on-read write delete files), and manifests written by the caller (:func:`commit_manifests`:
a large table's metadata without writing its data files)."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import (
    DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.typedef import Record

__all__ = ["DeleteManifestWriter", "commit_deletes", "commit_manifests", "new_snapshot_id"]


class DeleteManifestWriter(ManifestWriterV2):
    """PyIceberg's v2 manifest writer for a manifest of delete files (0.12 writes data ones only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def commit_deletes(table: Table, rows: pa.Table, *, equality_ids: list[int] | None = None,
                   partition: tuple = ()) -> Table:
    """Commit one delete file holding ``rows`` to ``table`` (its current spec and schema, the
    ``partition`` values given): position deletes (columns ``file_path``, ``pos``) unless
    ``equality_ids`` names the equality columns (``rows`` then holds those columns). Returns the
    table reloaded."""
    metadata, io = table.metadata, table.io
    snapshot_id = new_snapshot_id()
    path = f"{metadata.location}/data/deletes-{uuid.uuid4()}.parquet"
    with io.new_output(path).create() as stream:
        pq.write_table(rows, stream)
    delete = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES if equality_ids else DataFileContent.POSITION_DELETES,
        file_path=path, file_format=FileFormat.PARQUET, partition=Record(*partition),
        record_count=rows.num_rows, file_size_in_bytes=len(io.new_input(path)),
        equality_ids=equality_ids)
    delete.spec_id = metadata.default_spec_id
    manifest_path = f"{metadata.location}/metadata/{uuid.uuid4()}-m0.avro"
    with DeleteManifestWriter(metadata.spec(), metadata.schema(), io.new_output(manifest_path), snapshot_id,
                               "deflate") as writer:
        writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                                 data_file=delete))
    return commit_manifests(table, [writer.to_manifest_file()], snapshot_id, Operation.DELETE)


def new_snapshot_id() -> int:
    """A random positive snapshot id."""
    return int.from_bytes(uuid.uuid4().bytes[:7], "big")


def commit_manifests(table: Table, manifests: list, snapshot_id: int, operation: Operation = Operation.APPEND) -> Table:
    """Commit a snapshot ``snapshot_id`` of ``table`` whose manifest list holds the current
    snapshot's manifests and ``manifests`` (written by the caller for that snapshot id), as
    ``main``. Returns the table reloaded."""
    metadata, io = table.metadata, table.io
    parent = metadata.current_snapshot()
    sequence = metadata.next_sequence_number()
    list_path = f"{metadata.location}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(2, io.new_output(list_path), snapshot_id, parent.snapshot_id if parent else None,
                             sequence, "deflate") as listing:
        listing.add_manifests([*(parent.manifests(io) if parent else []), *manifests])
    snapshot = Snapshot(**{"snapshot-id": snapshot_id, "parent-snapshot-id": parent.snapshot_id if parent else None,
                           "sequence-number": sequence, "timestamp-ms": int(time.time() * 1000),
                           "manifest-list": list_path, "summary": Summary(operation),
                           "schema-id": metadata.current_schema_id})
    with table.transaction() as transaction:
        transaction._apply(
            (AddSnapshotUpdate(snapshot=snapshot),
             SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snapshot_id)),
            (AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id if parent else None),))
    return table.refresh()
