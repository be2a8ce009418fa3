"""Scan plans written byte for byte as a plain writer writes PyIceberg's own tasks (issue 50):
the planner remembers residuals and partition values' JSON per partition and converts
statistics with PyIceberg's conversions dispatched once, none of which may change one byte of
an answer. The table has three partition specs (an integer, an integer and a double whose
values include ``-0.0`` and ``0.0``, none), position deletes, equality deletes of a partition
and of the unpartitioned spec, statistics, split offsets, sort orders and key metadata; the
gateway's own FileIO reads its manifests (whole, :mod:`gateway.lakehouse.file_io`)."""

from __future__ import annotations

import json
import threading
import uuid

import pyarrow as pa
import pytest
from pyiceberg.conversions import from_bytes, to_bytes, to_json
from pyiceberg.manifest import (
    DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus, write_manifest,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import ManifestGroupPlanner, Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType

from gateway.iceberg.manifest_cache import ManifestCache
from gateway.iceberg.plan_models import PlanTableScanRequest
from gateway.iceberg.planning import Residuals, manifests, plan, scope
from gateway.lakehouse.file_io import file_io
from tests.support.iceberg.deletes import commit_deletes, commit_manifests, new_snapshot_id
from tests.support.iceberg.local_table import empty_table

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False),
                NestedField(3, "part", IntegerType(), required=False), NestedField(4, "f", DoubleType(), required=False))


def _data_files(table: Table, partitions: list[tuple], per_partition: int) -> Table:
    """Commit one manifest of ``per_partition`` data files per partition of ``partitions``
    (the current spec), with statistics of ``id`` and ``name``, and now and then split offsets,
    a sort order and key metadata."""
    metadata, io = table.metadata, table.io
    snapshot_id = new_snapshot_id()
    written = []
    for number, values in enumerate(partitions):
        path = f"{metadata.location}/metadata/{uuid.uuid4()}-m{number}.avro"
        with write_manifest(2, metadata.spec(), metadata.schema(), io.new_output(path), snapshot_id, "deflate") as writer:
            for f in range(per_partition):
                first = (number * per_partition + f) * 10
                data = DataFile.from_args(
                    content=DataFileContent.DATA, file_path=f"{metadata.location}/data/{uuid.uuid4()}.parquet",
                    file_format=FileFormat.PARQUET, partition=Record(*values), record_count=10,
                    file_size_in_bytes=1000 + f, column_sizes={1: 80, 2: 300, 3: 40}, value_counts={1: 10, 2: 10},
                    null_value_counts={1: 0, 2: f % 2}, nan_value_counts={4: 0},
                    lower_bounds={1: to_bytes(LongType(), first), 2: to_bytes(StringType(), f"n-{first}")},
                    upper_bounds={1: to_bytes(LongType(), first + 9), 2: to_bytes(StringType(), f"n-{first + 9}")},
                    split_offsets=[4, 400] if f % 2 else None, sort_order_id=0 if f % 3 == 0 else None,
                    key_metadata=b"\x01\xab" if f == 1 else None)
                data.spec_id = metadata.default_spec_id
                writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                                         data_file=data))
        written.append(writer.to_manifest_file())
    return commit_manifests(table, written, snapshot_id)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Table:
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="part"))
    table = empty_table(tmp_path_factory.mktemp("answers"), SCHEMA, spec)
    table = _data_files(table, [(0,), (1,), (2,), (None,)], 3)  # spec 0: part
    with table.update_spec() as update:
        update.add_identity("f")
    table = table.refresh()
    table = _data_files(table, [(1, 0.0), (1, -0.0), (1, 0.0), (2, 1.5), (2, None)], 2)  # spec 1: part, f
    some = next(t.file.file_path for t in table.scan().plan_files() if t.file.spec_id == 1 and t.file.partition[0] == 2)
    table = commit_deletes(table, pa.table({"file_path": [some], "pos": pa.array([1], pa.int64())}),
                           partition=(2, 1.5))  # position deletes of spec 1
    table = commit_deletes(table, pa.table({"id": pa.array([3], pa.int64())}), equality_ids=[1], partition=(1, 0.0))
    with table.update_spec() as update:
        update.remove_field("part").remove_field("f")
    table = table.refresh()
    table = _data_files(table, [()], 2)  # spec 2: unpartitioned, newer than the deletes
    return commit_deletes(table, pa.table({"id": pa.array([7], pa.int64())}), equality_ids=[1])  # every older file


# -- the plain writer: PyIceberg's tasks, each value converted where it is written --------------

def _file(data: DataFile, metadata, stats_ids: frozenset[int]) -> dict:
    ptype = metadata.specs()[data.spec_id].partition_type(metadata.schema())
    out = {"spec-id": data.spec_id,
           "content": {DataFileContent.DATA: "data", DataFileContent.POSITION_DELETES: "position-deletes",
                       DataFileContent.EQUALITY_DELETES: "equality-deletes"}[data.content],
           "file-path": data.file_path, "file-format": data.file_format.value.lower(),
           "partition": [None if v is None else to_json(f.field_type, v) for f, v in zip(ptype.fields, data.partition)],
           "file-size-in-bytes": data.file_size_in_bytes, "record-count": data.record_count}
    if data.split_offsets:
        out["split-offsets"] = list(data.split_offsets)
    if data.sort_order_id is not None:
        out["sort-order-id"] = data.sort_order_id
    if data.key_metadata:
        out["key-metadata"] = data.key_metadata.hex().upper()
    if data.content == DataFileContent.EQUALITY_DELETES and data.equality_ids:
        out["equality-ids"] = list(data.equality_ids)
    if stats_ids and data.content == DataFileContent.DATA:
        for key, values in (("column-sizes", data.column_sizes), ("value-counts", data.value_counts),
                            ("null-value-counts", data.null_value_counts), ("nan-value-counts", data.nan_value_counts),
                            ("lower-bounds", data.lower_bounds), ("upper-bounds", data.upper_bounds)):
            kept = {k: v for k, v in (values or {}).items() if k in stats_ids}
            if key.endswith("bounds"):
                kinds = {k: metadata.schema().find_type(k) for k in kept}
                kept = {k: to_json(kinds[k], from_bytes(kinds[k], v)) for k, v in kept.items()}
            if kept:
                out[key] = {"keys": list(kept), "values": list(kept.values())}
    return out


def _plainly(found, io, data, deletes, residuals: Residuals) -> str:
    equality = []

    def keep(entry: ManifestEntry) -> bool:
        if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
            equality.append(entry)
            return False
        return True

    tasks = ManifestGroupPlanner(found.metadata, io, found.filter, found.case_sensitive).plan_files(
        [*data, *deletes], manifest_entry_filter=keep)
    sequence = {e.data_file.file_path: e.sequence_number for m in data for e in m.fetch_manifest_entry(io)}
    unpartitioned = {s.spec_id for s in found.metadata.partition_specs if s.is_unpartitioned()}
    delete_files, written = [], []
    for task in tasks:
        applied = list(task.delete_files) + [
            e.data_file for e in equality if e.sequence_number > sequence[task.file.file_path]
            and (e.data_file.spec_id in unpartitioned or (e.data_file.spec_id, e.data_file.partition) == (
                task.file.spec_id, task.file.partition))]
        paths = [d["file-path"] for d in delete_files]
        refs = []
        for delete in sorted(applied, key=lambda d: d.file_path):
            if delete.file_path not in paths:
                paths.append(delete.file_path)
                delete_files.append(_file(delete, found.metadata, frozenset()))
            refs.append(paths.index(delete.file_path))
        out = {"data-file": _file(task.file, found.metadata, found.stats_ids)}
        if refs:
            out["delete-file-references"] = refs
        if (residual := residuals.of(task.residual)) is not None:
            out["residual-filter"] = residual
        written.append(out)
    return json.dumps({"delete-files": delete_files, "file-scan-tasks": written, "plan-tasks": []},
                      separators=(",", ":"))


@pytest.mark.parametrize("request_body", [
    {},
    {"stats-fields": ["id", "name"]},
    {"filter": {"type": "eq", "term": "part", "value": 1}, "stats-fields": ["name"]},
    {"filter": {"type": "or", "left": {"type": "lt", "term": "id", "value": 95},
                "right": {"type": "eq", "term": "part", "value": 1}}},
    {"filter": {"type": "eq", "term": "f", "value": 0.0}, "select": ["id"]},
    {"filter": {"type": "not-null", "term": "f"}, "stats-fields": ["id"]},
], ids=["whole table", "stats", "partition", "residuals", "signed zero", "not null"])
def test_answers_are_the_plain_writer_s_byte_for_byte(table: Table, request_body: dict):
    metadata = table.metadata
    assert len(metadata.partition_specs) == 3
    io = file_io({}, metadata.location)
    found = scope(metadata, PlanTableScanRequest.model_validate(request_body))
    data, deletes = manifests(found, io, ManifestCache(64 << 20))
    planned = plan(found, io, data, deletes, Residuals(found.filter, 1 << 20), threading.Event()).text()
    assert planned == _plainly(found, io, data, deletes, Residuals(found.filter, 1 << 20))
    answer = json.loads(planned)
    assert answer["file-scan-tasks"]
    if not request_body:  # what the table holds is all there
        assert len(answer["file-scan-tasks"]) == 4 * 3 + 5 * 2 + 2
        assert {d["content"] for d in answer["delete-files"]} == {"position-deletes", "equality-deletes"}
        assert "-0.0" in planned and '"partition":[1,0.0]' in planned and '"key-metadata":"01AB"' in planned
        assert any(len(t.get("delete-file-references", ())) == 2 for t in answer["file-scan-tasks"])
