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
  into groups of at most ``files_per_task`` live files as the manifest list counts them
  (:class:`Slice`), a manifest holding more cut alone into ranges of its entries (issue 50), each
  group planned alone with every delete manifest; the first answer plans groups while it holds
  at most ``files_per_task`` tasks and leaves the rest as plan tasks (:func:`first_answer`).
- **Confinement** (the gateway is a deputy): the manifest list and every manifest are read only
  below the table's location (locally: not through a symbolic link, regular files only), and a
  plan whose data or delete files lie elsewhere is refused whole (:class:`Foreign`).
- **Stopping** (issue 50): a plan reads its manifests through copies that check the plan's
  stop flag first, so a cancelled plan ends at its next manifest (:class:`Stopped`).
- **Bounded residuals** (issue 50): a residual that is the request's filter itself (every task
  of an unpartitioned table) is not written, and one answer writes at most ``max_residual_bytes``
  of residuals (:class:`Residuals`); a task without one is read with the request's filter, which
  the spec asks of a client ("If the residual is not present, the client must produce the
  residual or use the original filter") and which keeps the same rows.
- **Read restrictions** (issue 49): a trusted engine's plan of a table restricted for its caller
  has the required row filter ANDed into its filter (pruning), and every task's residual states
  it (:class:`Residuals`), budget or not (:mod:`gateway.iceberg.read_rules`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypeVar

from pyiceberg.conversions import from_bytes, to_json
from pyiceberg.exceptions import ResolveError
from pydantic import TypeAdapter
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, SerializableBooleanExpression
from pyiceberg.expressions.visitors import ResidualEvaluator, bind, extract_field_ids, manifest_evaluator
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntry, ManifestEntryStatus,
)
from pyiceberg.schema import Schema, index_by_id
from pyiceberg.table import FileScanTask as PlannedTask, IncrementalAppendScan, ManifestGroupPlanner
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot, ancestors_between_ids

from gateway.iceberg import errors
from gateway.iceberg.bodies import CLIENT_FAULTS
from gateway.iceberg.local_paths import irregular, linked
from gateway.iceberg.locations import stored
from gateway.iceberg.manifest_cache import ManifestCache, Stopped
from gateway.iceberg.plan_models import PlanTableScanRequest

__all__ = ["Foreign", "Planned", "Residuals", "Scope", "Slice", "Stopped", "first_answer", "manifests", "parts", "plan",
           "scope", "slices"]

T = TypeVar("T")


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
    #: The caller's required row filter (the load's ``read-restrictions``), already in ``filter``;
    #: every task's residual states it (:class:`Residuals`). None: none.
    required: BooleanExpression | None = None


@dataclass(frozen=True)
class Planned:
    """Planned tasks as the spec's ``ScanTasks`` writes them (JSON values: ten thousand tasks as
    pydantic models took seconds): ``delete-files``, ``file-scan-tasks``, ``plan-tasks``."""

    delete_files: list[dict] = field(default_factory=list)
    file_scan_tasks: list[dict] = field(default_factory=list)
    plan_tasks: list[str] = field(default_factory=list)

    def values(self) -> dict:
        return {"delete-files": self.delete_files, "file-scan-tasks": self.file_scan_tasks,
                "plan-tasks": self.plan_tasks}

    def text(self) -> str:
        """:meth:`values` as compact JSON text."""
        return json.dumps(self.values(), separators=(",", ":"))

    def add(self, other: Planned) -> None:
        """Append ``other``'s file scan tasks, its delete files kept once (by path) and its
        tasks' references renumbered into this answer's ``delete-files``."""
        index = {d["file-path"]: i for i, d in enumerate(self.delete_files)}
        moved = []
        for delete in other.delete_files:
            if delete["file-path"] not in index:
                index[delete["file-path"]] = len(self.delete_files)
                self.delete_files.append(delete)
            moved.append(index[delete["file-path"]])
        for task in other.file_scan_tasks:
            refs = task.get("delete-file-references")
            self.file_scan_tasks.append({**task, "delete-file-references": [moved[r] for r in refs]} if refs else task)


@dataclass(frozen=True)
class Slice:
    """One plan task: data manifests ``start`` to ``end`` (exclusive) of the pruned list; or,
    with ``first`` and ``last``, the live entries ``first`` to ``last`` (exclusive) of the one
    manifest ``start`` (``end`` is ``start + 1``), a part of a manifest of more than
    ``files_per_task`` live files. The part ending at the manifest's count reads to its end."""

    start: int
    end: int
    first: int | None = None
    last: int | None = None


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
        if ask.snapshot_id is not None:
            raise errors.BadRequest("snapshot-id is a point-in-time scan: not with end-snapshot-id")
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
    except RecursionError:
        raise errors.BadRequest("invalid filter: nested too deeply to bind") from None
    except CLIENT_FAULTS as exc:  # a missing column, a literal of the wrong type, PyIceberg's own checks
        raise errors.BadRequest(f"invalid filter: {str(exc)[:300] or type(exc).__name__}") from None
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


def _planner(scope: Scope, io: FileIO) -> ManifestGroupPlanner:
    return _Planner(scope.metadata, io, scope.filter, scope.case_sensitive)


class _Planner(ManifestGroupPlanner):
    """PyIceberg's planner, its residuals worked out once per partition: PyIceberg builds a
    residual evaluator for every data file (looking the current schema up each time) and
    evaluates it on each file's partition, where the evaluator depends on the spec, filter and
    schema only, and the residual on the partition's values only (:class:`_SpecResiduals`)."""

    def _build_residual_evaluator(self, spec_id: int) -> Callable[[DataFile], ResidualEvaluator]:
        return _SpecResiduals(super()._build_residual_evaluator(spec_id))


class _SpecResiduals:
    """One partition spec's residuals in one plan: PyIceberg's evaluator, built for the first
    data file and used for all (``plan_files`` evaluates residuals on its caller's thread, one
    file after another), its residuals remembered by partition (:func:`_partition_key`)."""

    def __init__(self, build: Callable[[DataFile], ResidualEvaluator]):
        self._build = build
        self._evaluator: ResidualEvaluator | None = None
        self._seen: dict[tuple, BooleanExpression] = {}

    def __call__(self, data_file: DataFile) -> _SpecResiduals:
        if self._evaluator is None:
            self._evaluator = self._build(data_file)
        return self

    def residual_for(self, partition) -> BooleanExpression:
        evaluator = self._evaluator
        assert evaluator is not None
        return _remembered(self._seen, _partition_key(partition), lambda: evaluator.residual_for(partition))


def manifests(scope: Scope, io: FileIO, cache: ManifestCache):
    """``(data manifests, delete manifests)`` of the scope's snapshot, data ones pruned by their
    partition summaries (PyIceberg's manifest evaluator). Raises :class:`Foreign`, and what
    reading raises."""
    if scope.snapshot is None:
        return [], []
    root = _Root(scope.metadata.location)
    if scope.appends is None:
        lists = [scope.snapshot.manifest_list]
    else:  # IncrementalAppendScan: the manifests each append added, from its own manifest list
        lists = [s.manifest_list for s in scope.metadata.snapshots if s.snapshot_id in scope.appends]
    found = []
    for manifest_list in lists:
        root.check(manifest_list, reads=True)
        for manifest in cache.manifests(io, manifest_list):
            root.check(manifest.manifest_path, reads=True)
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


def _live(manifest) -> int:
    """The live (added and existing) files the manifest list counts in ``manifest`` (0 when it
    does not count them: a v1 manifest list may not)."""
    return (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)


def slices(data: Sequence, files_per_task: int) -> list[Slice]:
    """Consecutive groups of ``data`` manifests of at most ``files_per_task`` live files each
    (as the manifest list counts them); a manifest of more is cut alone into parts of
    ``files_per_task`` of its entries, the last part the rest."""
    groups: list[Slice] = []
    start, files = 0, 0
    for index, manifest in enumerate(data):
        count = _live(manifest)
        if files and files + count > files_per_task:
            groups.append(Slice(start, index))
            start, files = index, 0
        if count > files_per_task:
            groups.extend(Slice(index, index + 1, first, min(first + files_per_task, count))
                          for first in range(0, count, files_per_task))
            start = index + 1
            continue
        files += count
    if start < len(data):
        groups.append(Slice(start, len(data)))
    return groups


def parts(data: Sequence, group: Slice) -> list | None:
    """The manifests ``group`` plans of ``data`` (the pruned data manifests, as
    :class:`~gateway.iceberg.manifest_cache.CachedManifest` records): ``data[start:end]``, or
    one manifest's part (:meth:`~gateway.iceberg.manifest_cache.CachedManifest.part`; the part
    that ends at the manifest's count reads to its end, so the parts cover every entry whatever
    the count). None when ``group`` is not a slice of ``data`` (an edited plan task): an empty
    or reversed range, one beyond ``data``, a part of several manifests, a part that is empty,
    reversed or beyond the manifest's count."""
    if not 0 <= group.start < group.end <= len(data):
        return None
    if group.first is None and group.last is None:
        return list(data[group.start:group.end])
    manifest, count = data[group.start], _live(data[group.start])
    if group.first is None or group.last is None or group.end != group.start + 1 \
            or not 0 <= group.first < group.last <= count:
        return None
    return [manifest.part(group.first, None if group.last == count else group.last)]


def first_answer(scope: Scope, io: FileIO, data: Sequence, deletes: Sequence, files_per_task: int,
                 task: Callable[[Slice], str], residuals: Residuals, stop: threading.Event) -> Planned:
    """The first answer to a plan: the :func:`slices` of ``data`` planned in order while the
    answer holds at most ``files_per_task`` file scan tasks, the slices left as plan tasks
    (``task`` names one). A filter that prunes most files is answered whole in one round trip.
    A slice that would take the answer past ``files_per_task`` is left as a plan task too
    (planned again when fetched). Raises what :func:`plan` raises."""
    answer = Planned()
    groups = slices(data, files_per_task)
    for number, group in enumerate(groups):
        held = len(answer.file_scan_tasks)
        planned = plan(scope, io, parts(data, group), deletes, residuals, stop) if held < files_per_task else None
        if planned is None or (held and held + len(planned.file_scan_tasks) > files_per_task):
            answer.plan_tasks.extend(task(rest) for rest in groups[number:])
            break
        answer.add(planned)
    return answer


def plan(scope: Scope, io: FileIO, data: Sequence, deletes: Sequence, residuals: Residuals,
         stop: threading.Event) -> Planned:
    """The file scan tasks of ``data`` manifests with ``deletes`` (PyIceberg's planner), as the
    spec's ``ScanTasks``, residuals written within ``residuals``' bytes. Raises :class:`Stopped`
    once ``stop`` is set (before the next manifest is read), :class:`Foreign`, and what reading
    raises."""
    if stop.is_set():
        raise Stopped
    data = [m.watched(stop) for m in data]
    deletes = [m.watched(stop) for m in deletes]
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
    return _written(scope, planned, equality, sequence, residuals)


def _equality_deletes(task: PlannedTask, equality: list[ManifestEntry], sequence: dict[str, int], unpartitioned) -> list:
    data = task.file
    seq = sequence.get(data.file_path, 0)
    return [e.data_file for e in equality
            if (e.sequence_number or 0) > seq
            and (e.data_file.spec_id in unpartitioned
                 or (e.data_file.spec_id == data.spec_id and e.data_file.partition == data.partition))]


class _Root:
    """The table's location, for the confinement of every path a plan reads or hands out: a
    path written below it plainly (its own prefix, no ``.``/``..``/empty segment, nothing a
    :func:`~gateway.iceberg.locations.parse` would refuse) passes at once; any other is parsed
    and compared as :mod:`gateway.iceberg.locations` compares locations."""

    def __init__(self, location: str):
        self.text = location
        self.location = stored(location)
        if self.location is None:
            raise Foreign(location)
        self.prefix = location.rstrip("/") + "/"

    def check(self, path: str, reads: bool) -> None:
        if not (path.startswith(self.prefix) and _PLAIN.fullmatch(path, len(self.prefix))):
            where = stored(path)
            if where is None or not self.location.contains(where):
                raise Foreign(path)
        if reads and (linked(path, self.text) or irregular(path)):
            raise Foreign(path)


#: A relative path of plain segments: no ``.``, ``..`` or empty one, no character that a
#: location may not hold or that could encode one (``%``, ``\\``, controls, ``?``, ``#``, ``*``, ``$``).
_PLAIN = re.compile(r"(?:(?!\.{1,2}(?:/|$))[^/%\\\x00-\x1f\x7f?#*$]+/)*(?!\.{1,2}$)[^/%\\\x00-\x1f\x7f?#*$]+")
_EXPRESSION = TypeAdapter(SerializableBooleanExpression)


class Residuals:
    """The residual filters of one answer, as written: none for a residual that is always true
    or is the request's ``row_filter`` itself, and none once ``budget`` bytes of JSON are
    written (one residual that would pass it ends the writing: later tasks carry none).

    With a ``required`` row filter (the caller's read restrictions, ANDed into ``row_filter``),
    every task carries a residual that holds it, whatever the budget: the planner's residual
    when it is the whole filter, else that residual AND the required filter (the required filter
    alone where the partition leaves nothing); a client that applied its own filter instead
    would read rows the restrictions do not allow."""

    def __init__(self, row_filter: BooleanExpression, budget: int, required: BooleanExpression | None = None):
        self.filter, self.left, self.required = row_filter, budget, required
        self._seen: dict[int, tuple[BooleanExpression, dict, int]] = {}  # by id: PyIceberg reuses them

    def of(self, residual: BooleanExpression | None) -> dict | None:
        """``residual`` as the spec's ``Expression`` JSON, None when it is not written."""
        if self.required is not None:
            return self._written(residual, self._bound)[1]
        if residual is None or residual is self.filter or self.left <= 0 or residual == AlwaysTrue():
            return None
        found = self._written(residual, lambda r: r)
        if found[2] > self.left:
            self.left = 0
            return None
        self.left -= found[2]
        return found[1]

    def _bound(self, residual: BooleanExpression | None) -> BooleanExpression:
        assert self.required is not None
        if residual is None or residual == AlwaysTrue():
            return self.required
        return residual if residual is self.filter or residual == self.filter else And(residual, self.required)

    def _written(self, residual, stated) -> tuple[BooleanExpression, dict, int]:
        found = self._seen.get(id(residual))
        if found is None:
            value = _EXPRESSION.dump_python(stated(residual), mode="json", by_alias=True)
            found = self._seen[id(residual)] = (residual, value, len(json.dumps(value, separators=(",", ":"))))
        return found


def _written(scope: Scope, planned: list[PlannedTask], equality: list[ManifestEntry],
             sequence: dict[str, int], residuals: Residuals) -> Planned:
    metadata = scope.metadata
    root = _Root(metadata.location)
    unpartitioned = {s.spec_id for s in metadata.partition_specs if s.is_unpartitioned()}
    files = _ContentFiles(metadata, scope.stats_ids)
    deletes: dict[str, int] = {}
    delete_files: list[dict] = []
    tasks: list[dict] = []
    for task in planned:
        root.check(task.file.file_path, reads=False)
        applied = [*task.delete_files]
        if equality:
            applied.extend(_equality_deletes(task, equality, sequence, unpartitioned))
        written = {"data-file": files.written(task.file)}
        if applied:
            refs = []
            for delete in sorted(applied, key=lambda d: d.file_path):
                if delete.file_path not in deletes:
                    root.check(delete.file_path, reads=False)
                    deletes[delete.file_path] = len(delete_files)
                    delete_files.append(files.written(delete))
                refs.append(deletes[delete.file_path])
            written["delete-file-references"] = refs
        # No residual left: none written. The spec's form of it ({"type": "true"}) is one neither
        # PyIceberg nor Java writes, and PyIceberg cannot read; without one, a client applies
        # the request's filter, which keeps the same rows.
        residual = residuals.of(task.residual)
        if residual is not None:
            written["residual-filter"] = residual
        tasks.append(written)
    return Planned(delete_files, tasks)


_CONTENT = {DataFileContent.DATA: "data", DataFileContent.POSITION_DELETES: "position-deletes",
            DataFileContent.EQUALITY_DELETES: "equality-deletes"}
_FORMATS = {f: f.value.lower() for f in FileFormat}


def _partition_key(partition) -> tuple | None:
    """A data file's partition values as a key under which equal partitions are written alike
    and have the same residual: the values and their types (``True`` and ``1`` apart); None
    where equal values may be written differently (``-0.0`` and ``0.0``, decimals ``1.0`` and
    ``1.00``)."""
    values = tuple(partition._data) if partition is not None else ()
    types = tuple(map(type, values))
    return None if float in types or Decimal in types else (values, types)


def _remembered(seen: dict, key: tuple | None, make: Callable[[], T]) -> T:
    """``seen[key]``, made first if missing; made and not kept for a key that is None or
    cannot be one (a value that is not hashable)."""
    if key is None:
        return make()
    try:
        found = seen.get(key)
    except TypeError:
        return make()
    if found is None:
        found = seen[key] = make()
    return found


class _ContentFiles:
    """Writes PyIceberg's ``DataFile`` records of one answer as the spec's ``DataFile``,
    ``PositionDeleteFile`` or ``EqualityDeleteFile`` (JSON values): partition values in the
    spec's JSON forms, column statistics only for ``stats_ids`` (the request's
    ``stats-fields``). What files share is worked out once per answer: each spec's partition
    type, the JSON of each distinct partition (a table has few, each in thousands of files),
    each statistics column's type and PyIceberg's conversions for it."""

    def __init__(self, metadata: TableMetadata, stats_ids: frozenset[int]):
        self.schema = metadata.schema()
        self.stats_ids = stats_ids
        self.types = {s.spec_id: s.partition_type(self.schema) for s in metadata.partition_specs}
        self._partitions: dict[tuple, list] = {}
        self._kinds: dict[int, tuple] = {}

    def written(self, data: DataFile) -> dict:
        written = {"spec-id": data.spec_id, "content": _CONTENT[data.content], "file-path": data.file_path,
                   "file-format": _FORMATS[data.file_format], "partition": self._partition(data),
                   "file-size-in-bytes": data.file_size_in_bytes, "record-count": data.record_count}
        if data.split_offsets:
            written["split-offsets"] = data.split_offsets  # the cached entry's own list: never changed
        if data.sort_order_id is not None:
            written["sort-order-id"] = data.sort_order_id
        if data.key_metadata:
            written["key-metadata"] = data.key_metadata.hex().upper()
        if data.content == DataFileContent.EQUALITY_DELETES and data.equality_ids:
            written["equality-ids"] = list(data.equality_ids)
        if self.stats_ids and data.content == DataFileContent.DATA:
            written.update(self._stats(data))
        return written

    def _partition(self, data: DataFile) -> list:
        """The partition values' JSON: one list, shared by the files of equal partitions."""
        def written() -> list:
            ptype = self.types.get(data.spec_id)
            values = data.partition._data if data.partition is not None else ()
            return [to_json(f.field_type, v) if v is not None else None
                    for f, v in zip(ptype.fields if ptype else (), values)]
        key = _partition_key(data.partition)
        return _remembered(self._partitions, key and (data.spec_id, key), written)

    def _kind(self, field_id: int) -> tuple:
        """``(type, from_bytes, to_json)`` of a statistics column: PyIceberg's conversions for
        its type, dispatched once."""
        found = self._kinds.get(field_id)
        if found is None:
            kind = self.schema.find_type(field_id)
            found = self._kinds[field_id] = (kind, from_bytes.dispatch(type(kind)), to_json.dispatch(type(kind)))
        return found

    def _stats(self, data: DataFile) -> dict:
        ids = self.stats_ids
        out = {}
        for key, values in (("column-sizes", data.column_sizes), ("value-counts", data.value_counts),
                            ("null-value-counts", data.null_value_counts), ("nan-value-counts", data.nan_value_counts)):
            kept = {k: v for k, v in (values or {}).items() if k in ids}
            if kept:
                out[key] = {"keys": list(kept), "values": list(kept.values())}
        for key, values in (("lower-bounds", data.lower_bounds), ("upper-bounds", data.upper_bounds)):
            kept = {}
            for field_id, raw in (values or {}).items():
                if field_id in ids:
                    kind, read, write = self._kind(field_id)
                    kept[field_id] = write(kind, read(kind, raw))
            if kept:
                out[key] = {"keys": list(kept), "values": list(kept.values())}
        return out
