"""Server-side scan planning on the gateway's own FileIO: PyIceberg's planning
(``ManifestGroupPlanner``: partition-summary pruning of manifests, partition and metrics
evaluation of entries, position-delete matching, residuals; ``IncrementalAppendScan``'s rules
for ``start-snapshot-id``/``end-snapshot-id``), over manifests read through the service's
:class:`~gateway.iceberg.manifest_cache.ManifestCache`, written as the spec's ``ScanTasks``.

Everything here is blocking (FileIO, Avro); handlers run it in a thread.

What PyIceberg does not do, written here after the spec's words:

- **Equality deletes** (PyIceberg's planner refuses them): a delete file of equality deletes
  applies to a data file when the data file's sequence number is strictly lower than the
  delete's and the delete's partition spec is unpartitioned or its spec and partition equal the
  data file's (the table spec, "Scan Planning").
- **Splitting**: the data manifests left after partition-summary pruning are cut, in order,
  into groups of about ``files_per_task`` live files; more than one group answers plan tasks
  (:class:`Slice`), each planned alone with every delete manifest.
- **Confinement** (the gateway is a deputy): the manifest list and every manifest are read only
  below the table's location (locally: not through a symbolic link, regular files only), and a
  plan whose data or delete files lie elsewhere is refused whole (:class:`Foreign`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyiceberg.conversions import from_bytes, to_json
from pyiceberg.exceptions import ResolveError
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import bind, extract_field_ids, manifest_evaluator
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.schema import Schema, index_by_id
from pyiceberg.table import FileScanTask as PlannedTask, IncrementalAppendScan, ManifestGroupPlanner
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot, ancestors_between_ids

from gateway.iceberg import errors
from gateway.iceberg.local_paths import irregular, linked
from gateway.iceberg.locations import Location, stored
from gateway.iceberg.manifest_cache import ManifestCache
from gateway.iceberg.plan_models import (
    DataFile, EqualityDeleteFile, FileScanTask, PlanTableScanRequest, PositionDeleteFile, ScanTaskList,
)

__all__ = ["Foreign", "Scope", "Slice", "plan", "scope"]


class Foreign(Exception):
    """A file the plan would read or hand out lies outside the table's location (``path``)."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


@dataclass(frozen=True)
class Scope:
    """What one request scans, checked against the table's metadata: the ``metadata`` to plan
    with (its current schema the one the request binds to), the ``snapshot`` to read manifests
    from (None: the table has none, nothing to plan), the append snapshots of an incremental
    scan (None: a point-in-time scan), the ``filter`` and the stats field ids."""

    metadata: TableMetadata
    snapshot: Snapshot | None
    appends: frozenset[int] | None
    filter: BooleanExpression
    case_sensitive: bool
    stats_ids: frozenset[int] = field(default_factory=frozenset)
    #: The top-level columns the request selects, filters on or asks statistics of.
    columns: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Slice:
    """One plan task: data manifests ``start`` to ``end`` (exclusive) of the pruned list."""

    start: int
    end: int


def _snapshot(metadata: TableMetadata, snapshot_id: int, what: str) -> Snapshot:
    found = metadata.snapshot_by_id(snapshot_id)
    if found is None:
        raise errors.BadRequest(f"{what} {snapshot_id} is not a snapshot of the table")
    return found


def scope(metadata: TableMetadata, ask: PlanTableScanRequest) -> Scope:
    """The :class:`Scope` of ``ask`` on ``metadata``: the snapshot (``snapshot-id``, else the
    main branch's), or the appends of ``start-snapshot-id`` (exclusive) to ``end-snapshot-id``
    as PyIceberg's ``IncrementalAppendScan`` takes them; the schema (the snapshot's with
    ``use-snapshot-schema``); ``filter``, ``select`` and ``stats-fields`` bound to it. Raises
    :class:`~errors.BadRequest` for an unknown snapshot, a range that is not one lineage, a
    column the schema lacks, a filter that does not bind to its column's type."""
    appends: frozenset[int] | None = None
    if ask.start_snapshot_id is not None or ask.end_snapshot_id is not None:
        if ask.end_snapshot_id is None:
            raise errors.BadRequest("start-snapshot-id needs end-snapshot-id")
        snapshot = _snapshot(metadata, ask.end_snapshot_id, "end-snapshot-id")
        if ask.start_snapshot_id is not None:
            try:
                IncrementalAppendScan(metadata, None, from_snapshot_id=ask.start_snapshot_id,  # type: ignore[arg-type]
                                      to_snapshot_id=ask.end_snapshot_id)._validate_and_resolve_snapshots()
            except ValueError as exc:
                raise errors.BadRequest(f"invalid incremental range: {str(exc)[:300]}") from None
        appends = frozenset(s.snapshot_id for s in ancestors_between_ids(
            from_snapshot_id_exclusive=ask.start_snapshot_id, to_snapshot_id_inclusive=ask.end_snapshot_id,
            table_metadata=metadata) if s.summary is not None and s.summary.operation == Operation.APPEND)
    elif ask.snapshot_id is not None:
        snapshot = _snapshot(metadata, ask.snapshot_id, "snapshot-id")
    else:
        snapshot = metadata.current_snapshot()
    if ask.use_snapshot_schema and snapshot is not None and snapshot.schema_id is not None:
        if not any(s.schema_id == snapshot.schema_id for s in metadata.schemas):
            raise errors.BadRequest(f"the schema {snapshot.schema_id} of the snapshot is not in the table's metadata")
        metadata = metadata.model_copy(update={"current_schema_id": snapshot.schema_id})
    schema = metadata.schema()
    case = ask.case_sensitive
    row_filter = ask.filter if ask.filter is not None else AlwaysTrue()
    try:
        used = extract_field_ids(bind(schema, row_filter, case))
    except (ResolveError, ValueError, TypeError) as exc:  # a missing column, a literal of the wrong type
        raise errors.BadRequest(f"invalid filter: {str(exc)[:300]}") from None
    used |= {_field_id(schema, name, case, "select") for name in ask.select or ()}
    stats = frozenset(_field_id(schema, name, case, "stats-fields") for name in ask.stats_fields or ())
    owners = {}
    for top in schema.fields:
        owners[top.field_id] = top.name
        if not top.field_type.is_primitive:
            owners.update(dict.fromkeys(index_by_id(top.field_type), top.name))
    columns = frozenset(owners[i] for i in used | stats if i in owners)
    return Scope(metadata, snapshot, appends, row_filter, case, stats, columns)


def _field_id(schema: Schema, name: str, case_sensitive: bool, what: str) -> int:
    try:
        return schema.find_field(name, case_sensitive).field_id
    except (ValueError, ResolveError):
        raise errors.BadRequest(f"{what} names {name[:200]!r}, which the table's schema has not") from None


def _confined(path: str, root: Location, table_root: str, reads: bool) -> None:
    where = stored(path)
    if where is None or not root.contains(where):
        raise Foreign(path)
    if reads and (linked(path, table_root) or irregular(path)):
        raise Foreign(path)


def _planner(scope: Scope, io: FileIO) -> ManifestGroupPlanner:
    return ManifestGroupPlanner(scope.metadata, io, scope.filter, scope.case_sensitive)


def manifests(scope: Scope, io: FileIO, cache: ManifestCache):
    """``(data manifests, delete manifests)`` of the scope's snapshot, data ones pruned by their
    partition summaries (PyIceberg's manifest evaluator). Raises :class:`Foreign`, and what
    reading raises."""
    if scope.snapshot is None:
        return [], []
    table_root = scope.metadata.location
    root = stored(table_root)
    if root is None:
        raise Foreign(table_root)
    if scope.appends is None:
        lists = [scope.snapshot.manifest_list]
    else:  # IncrementalAppendScan: the manifests each append added, from its own manifest list
        lists = [s.manifest_list for s in scope.metadata.snapshots if s.snapshot_id in scope.appends]
    found = []
    for manifest_list in lists:
        _confined(manifest_list, root, table_root, reads=True)
        for manifest in cache.manifests(io, manifest_list):
            _confined(manifest.manifest_path, root, table_root, reads=True)
            found.append(manifest)
    if scope.appends is not None:
        found = sorted({m.manifest_path: m for m in found if m.content == ManifestContent.DATA
                        and m.added_snapshot_id in scope.appends}.values(), key=lambda m: m.manifest_path)
    planner = _planner(scope, io)
    specs, schema = scope.metadata.specs(), scope.metadata.schema()
    evaluators: dict[int, object] = {}

    def kept(manifest) -> bool:
        spec_id = manifest.partition_spec_id
        if spec_id not in evaluators:
            evaluators[spec_id] = manifest_evaluator(specs[spec_id], schema, planner.partition_filters[spec_id],
                                                     scope.case_sensitive)
        return evaluators[spec_id](manifest)  # type: ignore[operator]

    data = [m for m in found if m.content == ManifestContent.DATA and kept(m)]
    return data, [m for m in found if m.content == ManifestContent.DELETES]


def slices(data: Sequence, files_per_task: int) -> list[Slice]:
    """Consecutive groups of ``data`` manifests of about ``files_per_task`` live files each."""
    groups: list[Slice] = []
    start, files = 0, 0
    for index, manifest in enumerate(data):
        count = (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)
        if files and files + count > files_per_task:
            groups.append(Slice(start, index))
            start, files = index, 0
        files += count
    if start < len(data) or not groups:
        groups.append(Slice(start, len(data)))
    return groups


def plan(scope: Scope, io: FileIO, data: Sequence, deletes: Sequence) -> ScanTaskList:
    """The file scan tasks of ``data`` manifests with ``deletes`` (PyIceberg's planner), as the
    spec's ``ScanTasks``. Raises :class:`Foreign`, and what reading raises."""
    equality: list[ManifestEntry] = []

    def entry_filter(entry: ManifestEntry) -> bool:
        if scope.appends is not None and not (entry.snapshot_id in scope.appends
                                              and entry.status == ManifestEntryStatus.ADDED):
            return False
        if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
            equality.append(entry)  # matched below: PyIceberg's planner refuses them
            return False
        return True

    planned = _planner(scope, io).plan_files([*data, *deletes], manifest_entry_filter=entry_filter)
    sequence = {}
    if equality:  # the data files' sequence numbers, which PyIceberg's tasks do not carry
        for manifest in data:
            for entry in manifest.fetch_manifest_entry(io):
                sequence[entry.data_file.file_path] = entry.sequence_number or 0
    return _written(scope, planned, equality, sequence)


def _equality_deletes(task: PlannedTask, equality: list[ManifestEntry], sequence: dict[str, int], unpartitioned) -> list:
    data = task.file
    seq = sequence.get(data.file_path, 0)
    return [e.data_file for e in equality
            if (e.sequence_number or 0) > seq
            and (e.data_file.spec_id in unpartitioned
                 or (e.data_file.spec_id == data.spec_id and e.data_file.partition == data.partition))]


def _written(scope: Scope, planned: list[PlannedTask], equality: list[ManifestEntry],
             sequence: dict[str, int]) -> ScanTaskList:
    metadata = scope.metadata
    table_root = metadata.location
    root = stored(table_root)
    assert root is not None
    unpartitioned = {s.spec_id for s in metadata.partition_specs if s.is_unpartitioned()}
    partition_types = {s.spec_id: s.partition_type(metadata.schema()) for s in metadata.partition_specs}
    schema = metadata.schema()
    deletes: dict[str, int] = {}
    delete_files: list = []
    tasks: list[FileScanTask] = []
    for task in planned:
        _confined(task.file.file_path, root, table_root, reads=False)
        refs = []
        applied = [*task.delete_files]
        if equality:
            applied.extend(_equality_deletes(task, equality, sequence, unpartitioned))
        for delete in sorted(applied, key=lambda d: d.file_path):
            if delete.file_path not in deletes:
                _confined(delete.file_path, root, table_root, reads=False)
                deletes[delete.file_path] = len(delete_files)
                delete_files.append(_content_file(delete, partition_types, schema, frozenset()))
            refs.append(deletes[delete.file_path])
        # No residual left: none written. The spec's form of it ({"type": "true"}) is one neither
        # PyIceberg nor Java writes, and PyIceberg cannot read; without one, a client applies
        # the request's filter, which keeps the same rows.
        residual = None if task.residual is None or task.residual == AlwaysTrue() else task.residual
        tasks.append(FileScanTask.model_construct(
            data_file=_content_file(task.file, partition_types, schema, scope.stats_ids),
            delete_file_references=refs or None, residual_filter=residual))
    return ScanTaskList.model_construct(delete_files=delete_files, file_scan_tasks=tasks, plan_tasks=[])


def _content_file(data, partition_types, schema: Schema, stats_ids: frozenset[int]):
    """PyIceberg's ``DataFile`` record as the spec's ``DataFile``, ``PositionDeleteFile`` or
    ``EqualityDeleteFile``: partition values in the spec's JSON forms, column statistics only
    for ``stats_ids`` (the request's ``stats-fields``)."""
    ptype = partition_types.get(data.spec_id)
    partition = [to_json(f.field_type, v) if v is not None else None
                 for f, v in zip(ptype.fields if ptype else (), data.partition._data if data.partition else ())]
    common = {"spec_id": data.spec_id, "partition": partition, "file_path": data.file_path,
              "file_format": data.file_format, "file_size_in_bytes": data.file_size_in_bytes,
              "record_count": data.record_count, "split_offsets": data.split_offsets,
              "sort_order_id": data.sort_order_id,
              "key_metadata": data.key_metadata.hex().upper() if data.key_metadata else None}
    if data.content == DataFileContent.POSITION_DELETES:
        return PositionDeleteFile.model_construct(content="position-deletes", **common)
    if data.content == DataFileContent.EQUALITY_DELETES:
        return EqualityDeleteFile.model_construct(content="equality-deletes", equality_ids=data.equality_ids, **common)
    return DataFile.model_construct(content="data", **common, **(_stats(data, schema, stats_ids) if stats_ids else {}))


def _stats(data, schema: Schema, ids: frozenset[int]) -> dict:
    from pyiceberg.catalog.rest.scan_planning import CountMap, ValueMap

    def counts(values):
        kept = {k: v for k, v in (values or {}).items() if k in ids}
        return CountMap(keys=list(kept), values=list(kept.values())) if kept else None

    def bounds(values):
        kept = {}
        for key, raw in (values or {}).items():
            if key in ids:
                kind = schema.find_type(key)
                kept[key] = to_json(kind, from_bytes(kind, raw))
        return ValueMap.model_construct(keys=list(kept), values=list(kept.values())) if kept else None

    return {"column_sizes": counts(data.column_sizes), "value_counts": counts(data.value_counts),
            "null_value_counts": counts(data.null_value_counts), "nan_value_counts": counts(data.nan_value_counts),
            "lower_bounds": bounds(data.lower_bounds), "upper_bounds": bounds(data.upper_bounds)}
