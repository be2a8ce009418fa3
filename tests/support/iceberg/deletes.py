"""Row-level deletes for test tables, which PyIceberg 0.12 reads (position deletes) but does not
write (its deletes rewrite data files): :func:`commit_deletes` writes one delete file with
PyArrow, a delete manifest and a manifest list with PyIceberg's writers, and commits the snapshot
through the table's catalog (the gateway), as a merge-on-read engine (Spark, Flink) would."""

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

__all__ = ["commit_deletes"]


class _DeleteManifestWriter(ManifestWriterV2):
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
    snapshot_id = int.from_bytes(uuid.uuid4().bytes[:7], "big")
    parent = metadata.current_snapshot()
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
    with _DeleteManifestWriter(metadata.spec(), metadata.schema(), io.new_output(manifest_path), snapshot_id,
                               "deflate") as writer:
        writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                                 data_file=delete))
    manifest = writer.to_manifest_file()
    sequence = metadata.next_sequence_number()
    list_path = f"{metadata.location}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(2, io.new_output(list_path), snapshot_id, parent.snapshot_id if parent else None,
                             sequence, "deflate") as listing:
        listing.add_manifests([*(parent.manifests(io) if parent else []), manifest])
    snapshot = Snapshot(**{"snapshot-id": snapshot_id, "parent-snapshot-id": parent.snapshot_id if parent else None,
                           "sequence-number": sequence, "timestamp-ms": int(time.time() * 1000),
                           "manifest-list": list_path, "summary": Summary(Operation.DELETE),
                           "schema-id": metadata.current_schema_id})
    with table.transaction() as transaction:
        transaction._apply(
            (AddSnapshotUpdate(snapshot=snapshot),
             SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snapshot_id)),
            (AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id if parent else None),))
    return table.refresh()
