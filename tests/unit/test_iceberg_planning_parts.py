"""The parts of server-side scan planning that need no gateway (issue 42): the manifest cache
over real manifests written by PyIceberg, plan ids and plan tasks, the split into plan tasks,
and the planning settings' validation; and the bounds of issue 50: a stopped plan's reads,
residuals, filters, binding failures, the plan cache; a manifest of more than
``files_per_task`` files planned in parts of its entries, each answer within ``files_per_task``."""

from __future__ import annotations

import base64
import json
import threading
import time
import zlib
from dataclasses import replace
from types import SimpleNamespace
from pathlib import Path

import pytest
from pydantic import ValidationError
from pyiceberg.conversions import to_bytes
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, Not, NotNull
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus, ManifestFile, read_manifest_list,
    write_manifest, write_manifest_list,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.typedef import Record
from pyiceberg.types import DecimalType, LongType, NestedField

from gateway.iceberg import errors
from gateway.iceberg.manifest_cache import CachedManifest, ManifestCache
from gateway.iceberg.plan_cache import PlanCache, key as plan_key
from gateway.iceberg.plan_models import PlanTableScanRequest
from gateway.iceberg.plan_store import PLAN, TASK, PlanningOptions, decode, encode, owned
from gateway.iceberg.planning import (
    Planned, Residuals, Scope, Slice, Stopped, first_answer, manifests, parts, plan, scope, slices,
)
from gateway.observability import metrics
from tests.support.iceberg.deletes import DeleteManifestWriter

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


def _manifests(directory: Path, count: int, files: int) -> str:
    """A manifest list of ``count`` manifests of ``files`` data files each; its path."""
    io = PyArrowFileIO()
    written = []
    for m in range(count):
        with write_manifest(2, UNPARTITIONED_PARTITION_SPEC, SCHEMA, io.new_output(str(directory / f"m{m}.avro")),
                            snapshot_id=1, avro_compression="deflate") as writer:
            for f in range(files):
                data = DataFile.from_args(content=DataFileContent.DATA, file_path=f"{directory}/d{m}-{f}.parquet",
                                          file_format=FileFormat.PARQUET, partition=Record(), record_count=1,
                                          file_size_in_bytes=10, lower_bounds={1: b"\x01" * 8})
                data.spec_id = 0
                writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, data_file=data))
        written.append(writer.to_manifest_file())
    path = str(directory / "snap-1.avro")
    with write_manifest_list(2, io.new_output(path), 1, None, 1, "deflate") as listing:
        listing.add_manifests(written)
    return path


def _lookups(labels: tuple[str, str], result: str) -> float:
    return metrics.child(metrics.ICEBERG_MANIFEST_CACHE_LOOKUPS, *labels, result)._value.get()


def test_the_cache_reads_each_manifest_once_and_gives_pyiceberg_s_entries(tmp_path: Path):
    listing = _manifests(tmp_path, 3, 4)
    labels = ("unit", "once")
    cache, io = ManifestCache(64 * 1024 * 1024, labels), PyArrowFileIO()
    found = cache.manifests(io, listing)
    assert all(isinstance(m, CachedManifest) for m in found) and len(found) == 3
    assert cache.manifests(io, listing) is found
    first = found[0].fetch_manifest_entry(io)
    assert [e.data_file.file_path for e in first] == [e.data_file.file_path for e in
                                                       ManifestFile.fetch_manifest_entry(found[0], io)]
    assert found[0].fetch_manifest_entry(io) is first  # the same parsed list, no read
    assert (_lookups(labels, "hit"), _lookups(labels, "miss")) == (2, 2)
    assert len(found[0].fetch_manifest_entry(io, discard_deleted=False)) == 4  # not cached: another shape
    assert metrics.child(metrics.ICEBERG_MANIFEST_CACHE_BYTES, *labels)._value.get() == cache.bytes > 0


def test_the_cache_stays_within_its_bytes_dropping_the_least_recently_used(tmp_path: Path):
    listing = _manifests(tmp_path, 6, 20)
    io = PyArrowFileIO()
    probe = ManifestCache(1 << 30, ("unit", "probe"))
    manifests = probe.manifests(io, listing)
    one = probe.bytes
    for m in manifests:
        m.fetch_manifest_entry(io)
    per_manifest = (probe.bytes - one) / len(manifests)
    cache = ManifestCache(int(one + 2.5 * per_manifest), ("unit", "bounded"))
    kept = cache.manifests(io, listing)
    for m in kept:
        m.fetch_manifest_entry(io)
        assert cache.bytes <= cache.max_bytes
    assert len(cache) <= 3  # at most the two most recent manifests and the list
    kept[-1].fetch_manifest_entry(io)
    assert _lookups(("unit", "bounded"), "hit") == 1
    kept[0].fetch_manifest_entry(io)  # dropped: read again
    assert _lookups(("unit", "bounded"), "miss") == 8
    nothing = ManifestCache(0, ("unit", "off"))
    nothing.manifests(io, listing)
    assert len(nothing) == 0 and nothing.bytes == 0


def test_tokens_round_trip_and_refuse_what_is_not_one():
    payload = {"k": TASK, "u": "etl", "ns": "db", "t": "t", "x": time.time() + 60, "rq": {}, "m": [0, 2]}
    token = encode(payload)
    assert decode(token, TASK) == payload and decode(token, PLAN) is None
    assert owned(decode(token, TASK), "etl", "db", "t")
    for user, db, table in (("bob", "db", "t"), ("etl", "db2", "t"), ("etl", "db", "u")):
        assert not owned(decode(token, TASK), user, db, table)
    assert not owned(decode(encode({**payload, "x": time.time() - 1}), TASK), "etl", "db", "t")
    assert not owned(decode(encode({**payload, "x": "never"}), TASK), "etl", "db", "t")
    bomb = base64.urlsafe_b64encode(zlib.compress(b"[" + b" " * (1 << 22) + b"]")).decode()
    for bad in ("", "!!!", "pending-abc", base64.urlsafe_b64encode(b"not zlib").decode(), bomb,
                base64.urlsafe_b64encode(zlib.compress(b"[1, 2]")).decode()):
        assert decode(bad, TASK) is None


class _Manifest:
    def __init__(self, added: int | None, existing: int | None = 0):
        self.added_files_count, self.existing_files_count = added, existing


def test_data_manifests_are_cut_into_plan_tasks_of_at_most_files_per_task():
    assert slices([], 10) == []
    assert slices([_Manifest(3), _Manifest(3), _Manifest(3)], 10) == [Slice(0, 3)]
    assert slices([_Manifest(6), _Manifest(6), _Manifest(2, 2), _Manifest(None, None)], 10) == [
        Slice(0, 1), Slice(1, 4)]
    # issue 50: a manifest of more is cut alone into parts of its entries, the last the rest
    assert slices([_Manifest(3), _Manifest(20, 5), _Manifest(1), _Manifest(9)], 10) == [
        Slice(0, 1), Slice(1, 2, 0, 10), Slice(1, 2, 10, 20), Slice(1, 2, 20, 25), Slice(2, 4)]
    assert slices([_Manifest(11)], 10) == [Slice(0, 1, 0, 10), Slice(0, 1, 10, 11)]
    assert slices([_Manifest(10), _Manifest(None, None)], 10) == [Slice(0, 2)]  # uncounted: never cut


@pytest.mark.parametrize("options", [{"files_per_task": 0}, {"wait_seconds": 0}, {"manifest_cache_mib": -1},
                                     {"expiry_seconds": 0}, {"unknown": 1}])
def test_planning_options_are_validated(options):
    with pytest.raises(ValidationError):
        PlanningOptions(**options)


def test_answers_merge_with_each_delete_file_once_and_references_renumbered():
    first = Planned([{"file-path": "d1"}], [{"data-file": {"file-path": "a"}, "delete-file-references": [0]}])
    first.add(Planned([{"file-path": "d2"}, {"file-path": "d1"}],
                      [{"data-file": {"file-path": "b"}, "delete-file-references": [1, 0]},
                       {"data-file": {"file-path": "c"}}]))
    assert first.delete_files == [{"file-path": "d1"}, {"file-path": "d2"}]
    assert [t.get("delete-file-references") for t in first.file_scan_tasks] == [[0], [0, 1], None]


def _scope(tmp_path: Path, row_filter=None, schema: Schema = SCHEMA) -> Scope:
    metadata = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, str(tmp_path), {})
    return Scope(metadata, None, None, row_filter if row_filter is not None else AlwaysTrue(), True)


class _Counted(PyArrowFileIO):
    """A FileIO counting the manifests it opens, which sets ``stop`` at the first."""

    def __init__(self, stop: threading.Event):
        super().__init__()
        self.stop, self.opened = stop, []

    def new_input(self, location: str):
        if "/m" in location:
            self.opened.append(location)
            self.stop.set()
        return super().new_input(location)


def test_a_stopped_plan_reads_no_manifest_after_its_stop(tmp_path: Path):
    """Issue 50: a cancel stops the work at the next manifest: the stop flag is set while the
    first manifest is read; PyIceberg has the rest in flight on its threads (at most 32, Python's
    default), and each of them reads nothing."""
    listing = _manifests(tmp_path, 64, 1)
    cache = ManifestCache(64 * 1024 * 1024, ("unit", "stopped"))
    stop = threading.Event()
    io = _Counted(stop)
    data = cache.manifests(io, listing)
    with pytest.raises(Stopped):
        plan(_scope(tmp_path), io, data, [], Residuals(AlwaysTrue(), 0), stop)
    assert 1 <= len(io.opened) <= 32
    with pytest.raises(Stopped):  # stopped before it starts: nothing read
        plan(_scope(tmp_path), io, data, [], Residuals(AlwaysTrue(), 0), stop)
    assert len(io.opened) <= 32
    # the cached records are not the plan's: another plan reads them all
    answer = plan(_scope(tmp_path), PyArrowFileIO(), data, [], Residuals(AlwaysTrue(), 0), threading.Event())
    assert len(answer.file_scan_tasks) == 64


def test_a_residual_is_never_the_request_s_filter_and_an_answer_s_residuals_are_bounded(tmp_path: Path):
    """Issue 50: the full residual was written into every task (a 1 MiB ``IN`` list times 5,000
    tasks). For an unpartitioned table every task's residual is the request's filter: none is
    written (the spec has the client use the original filter)."""
    listing = _manifests(tmp_path, 4, 5)
    io = PyArrowFileIO()
    data = ManifestCache(64 * 1024 * 1024, ("unit", "residual")).manifests(io, listing)
    row_filter = In("id", set(range(1000)))
    found = _scope(tmp_path, row_filter)
    answer = plan(found, io, data, [], Residuals(found.filter, 1024 * 1024), threading.Event())
    assert len(answer.file_scan_tasks) == 20
    assert not any("residual-filter" in t for t in answer.file_scan_tasks)
    # others are written while the answer's budget lasts; the first that does not fit ends it
    small, large = GreaterThan("id", 5), In("id", set(range(100)))
    residuals = Residuals(row_filter, 100)
    written = [residuals.of(r) for r in (small, small, AlwaysTrue(), large, small, None)]
    assert written == [{"type": "gt", "term": "id", "value": 5}] * 2 + [None] * 4
    assert Residuals(row_filter, 0).of(small) is None


def test_a_required_row_filter_prunes_and_is_in_every_task_s_residual_whatever_the_budget(tmp_path: Path):
    """Issue 49: the caller's required filter is ANDed into the plan's filter (pruning: every
    file's lower bound of id is 0x0101010101010101, so ``id < 0`` prunes them all) and every task
    carries a residual holding it, even past the budget (0 here) and where the planner's residual
    is the whole filter (it would otherwise be left out, and a client would read with its own
    filter alone)."""
    from gateway.iceberg.read_rules import Readable, bound

    listing = _manifests(tmp_path, 2, 3)
    io = PyArrowFileIO()
    data = ManifestCache(64 * 1024 * 1024, ("unit", "required")).manifests(io, listing)
    ref = {"type": "reference", "id": 1}
    restrictions = {"required-row-filter": {"type": "and", "left": {"type": "not-null", "child": ref},
                                            "right": {"type": "gt", "left": ref, "right": {"type": "literal", "value": 1}}}}
    asked = _scope(tmp_path, GreaterThan("id", 0))
    table = Readable(str(tmp_path / "m.json"), asked.metadata, None, restrictions)
    found = bound(SimpleNamespace(user="ana"), "db", "t", table, asked)
    assert found.filter == And(GreaterThan("id", 0), And(NotNull("id"), GreaterThan("id", 1)))
    answer = plan(found, io, data, [], Residuals(found.filter, 0, found.required), threading.Event())
    # every file's lower bound is 1 and its upper bound unknown: none is pruned, each states the filter
    assert len(answer.file_scan_tasks) == 6
    whole = {"type": "and", "left": {"type": "gt", "term": "id", "value": 0}, "right": {
        "type": "and", "left": {"type": "not-null", "term": "id"}, "right": {"type": "gt", "term": "id", "value": 1}}}
    assert [t["residual-filter"] for t in answer.file_scan_tasks] == [whole] * 6
    residuals = Residuals(found.filter, 0, found.required)
    assert residuals.of(AlwaysTrue()) == residuals.of(None) == whole["right"]
    assert residuals.of(GreaterThan("id", 0)) == whole  # a partial residual AND the required filter
    # a filter no file can hold prunes them all
    none = {"required-row-filter": {"type": "lt", "left": ref, "right": {"type": "literal", "value": 0}}}
    pruned = bound(SimpleNamespace(user="ana"), "db", "t", Readable("m", asked.metadata, None, none), asked)
    assert plan(pruned, io, data, [], Residuals(pruned.filter, 0, pruned.required), threading.Event()).file_scan_tasks == []


def test_stats_of_a_masked_column_and_a_required_filter_over_a_missing_column_are_refused(tmp_path: Path):
    from gateway.iceberg.read_rules import Readable, bound

    masked = {"required-column-projections": [{"field-id": 1, "action": "mask-to-fixed-value"}]}
    asked = replace(_scope(tmp_path), stats_ids=frozenset({1}))
    with pytest.raises(errors.Forbidden, match="stats-fields names id of db.t, which is masked or denied for ana"):
        bound(SimpleNamespace(user="ana"), "db", "t", Readable("m", asked.metadata, None, masked), asked)
    assert bound(SimpleNamespace(user="ana"), "db", "t", Readable("m", asked.metadata, None, masked),
                 replace(asked, stats_ids=frozenset())).required is None
    elsewhere = {"required-row-filter": {"type": "is-null", "child": {"type": "reference", "id": 9}}}
    with pytest.raises(errors.Forbidden, match="names field 9, which the schema of this scan lacks"):
        bound(SimpleNamespace(user="ana"), "db", "t", Readable("m", asked.metadata, None, elsewhere), _scope(tmp_path))


@pytest.mark.parametrize("raw, says", [
    ({"type": "not", "child": {"type": "not", "child": {"type": "eq", "term": "id", "value": 1}}},
     "nested deeper than planning.max_filter_depth (3 levels)"),
    ({"type": "in", "term": "id", "values": list(range(11))}, "11 literal values, more than planning.max_filter_literals (10)"),
    ({"type": "eq", "term": "id", "value": "x" * 200}, "more than planning.max_filter_bytes (128)"),
])
def test_filters_beyond_the_service_s_bounds_are_400_naming_the_bound(raw, says):
    catalog = SimpleNamespace(service=SimpleNamespace(planning=PlanningOptions(
        max_filter_depth=3, max_filter_literals=10, max_filter_bytes=128)))
    with pytest.raises(errors.BadRequest) as refused:
        PlanTableScanRequest.from_request(catalog, None, json.dumps({"filter": raw}).encode())
    assert says in refused.value.message
    within = {"type": "in", "term": "id", "values": list(range(10))}
    assert PlanTableScanRequest.from_request(catalog, None, json.dumps({"filter": within}).encode()).filter == In(
        "id", set(range(10)))
    with pytest.raises(errors.BadRequest, match="planning.max_filter_depth"):  # deeper than PyIceberg reads
        PlanTableScanRequest.from_request(catalog, None, b'{"filter": ' + b"[" * 500 + b"]" * 500 + b"}")


def test_a_filter_that_does_not_bind_is_400_whatever_pyiceberg_raises(tmp_path: Path):
    """Issue 50: a deeply nested filter raised ``RecursionError`` in binding, and a decimal
    column compared with text ``decimal.InvalidOperation``: both were 500s."""
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "d", DecimalType(10, 2),
                                                                                    required=False))
    deep = EqualTo("id", 1)
    for _ in range(5000):
        deep = Not(deep) if isinstance(deep, EqualTo) else And(deep, EqualTo("id", 2))
    for row_filter, says in ((deep, "nested too deeply"), (EqualTo("d", "abc"), "invalid filter")):
        ask = PlanTableScanRequest.model_construct(filter=row_filter, case_sensitive=True, use_snapshot_schema=False,
                                                   select=None, stats_fields=None, snapshot_id=None,
                                                   start_snapshot_id=None, end_snapshot_id=None)
        with pytest.raises(errors.BadRequest, match=says):
            scope(_scope(tmp_path, schema=schema).metadata, ask)


@pytest.mark.parametrize("options", [{"max_pending": 4, "max_pending_per_user": 5}, {"threads": 2, "threads_per_user": 3},
                                     {"max_filter_depth": 1000}, {"max_filter_bytes": 1024 * 1024},
                                     {"expiry_seconds": 60, "plan_cache_seconds": 60},
                                     {"expiry_seconds": 20, "plan_cache_seconds": 10, "wait_seconds": 30}])
def test_planning_shares_and_bounds_are_validated(options):
    with pytest.raises(ValidationError):
        PlanningOptions(**options)


def test_the_plan_cache_keeps_answers_by_key_within_its_bytes_and_its_seconds(monkeypatch):
    labels = ("unit", "plans")
    now = [1000.0]
    monkeypatch.setattr("gateway.iceberg.plan_cache.time.monotonic", lambda: now[0])
    answers = PlanCache(25, 60.0, labels)
    first, second, third = (plan_key("etl", "db", "t", f"m{n}.json", {"select": ["id"]}) for n in (1, 2, 3))
    assert plan_key("etl", "db", "t", "m1.json", {"select": ["id"], "filter": True}) != first
    assert plan_key("bob", "db", "t", "m1.json", {"select": ["id"]}) != first
    restricted = {"required-row-filter": {"type": "is-null", "child": {"type": "reference", "id": 1}}}
    assert plan_key("etl", "db", "t", "m1.json", {"select": ["id"]}, restricted) != first  # issue 49
    assert answers.get(first) is None
    answers.put(first, "{" + "a" * 9 + "}")
    answers.put(second, "{" + "b" * 9 + "}")
    assert answers.get(first) == "{" + "a" * 9 + "}"  # now the most recently used
    answers.put(third, "{" + "c" * 9 + "}")  # 33 bytes: the least recently used goes
    assert answers.get(second) is None and answers.get(first) is not None and answers.bytes == 22
    answers.put(first, "{" + "z" * 30 + "}")  # larger than the whole cache: not kept
    assert answers.get(first) == "{" + "a" * 9 + "}"
    now[0] += 60
    assert answers.get(third) is None and answers.get(first) is None and answers.bytes == 0 and len(answers) == 0
    lookups = {result: metrics.child(metrics.ICEBERG_PLAN_CACHE_LOOKUPS, *labels, result)._value.get()
               for result in ("hit", "miss")}
    assert lookups == {"hit": 3, "miss": 4}
    assert metrics.child(metrics.ICEBERG_PLAN_CACHE_BYTES, *labels)._value.get() == 0


# Issue 50: a manifest of more than files_per_task live files is cut into plan tasks of its entries.

def _data_file(path: str, low: int | None = None, high: int | None = None, content=DataFileContent.DATA, **more):
    bounds = {} if low is None else {"lower_bounds": {1: to_bytes(LongType(), low)},
                                     "upper_bounds": {1: to_bytes(LongType(), high)}}
    data = DataFile.from_args(content=content, file_path=path, file_format=FileFormat.PARQUET, partition=Record(),
                              record_count=10, file_size_in_bytes=100, **{**bounds, **more})
    data.spec_id = 0
    return data


def _listed(io, path: str, snapshot_id: int, sequence: int, manifests: list) -> list:
    """``manifests`` in a manifest list of ``sequence`` (new ones take it), read back."""
    with write_manifest_list(2, io.new_output(path), snapshot_id, None, sequence, "deflate") as listing:
        listing.add_manifests(manifests)
    return list(read_manifest_list(io.new_input(path)))


def _one_big_manifest(tmp_path: Path, row_filter=None) -> Scope:
    """A table whose data is one manifest of 25 live files, ``d00`` to ``d24`` (``dNN`` holds ids
    10·NN to 10·NN+9): ``d00``–``d14`` existing since sequence number 1, a deleted entry among them
    (offsets count live entries), ``d15``–``d24`` added at 3. Deletes: at sequence number 2 a
    position delete of ``d03`` alone (path bounds), one of the whole (unpartitioned) table and an
    equality delete on ``id``, which apply to the existing files only; at 4 a position delete of
    the whole table, which applies to all. The scope of snapshot 4 with ``row_filter``."""
    io = PyArrowFileIO()
    root = str(tmp_path)

    def deletes(name: str, snapshot_id: int, *files) -> ManifestFile:
        with DeleteManifestWriter(UNPARTITIONED_PARTITION_SPEC, SCHEMA, io.new_output(f"{root}/metadata/{name}.avro"),
                                  snapshot_id, "deflate") as writer:
            for delete in files:
                writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                                         data_file=delete))
        return writer.to_manifest_file()

    path = f"{root}/data/d03.parquet".encode()
    older = _listed(io, f"{root}/metadata/snap-2.avro", 2, 2, [deletes(
        "deletes-2", 2, _data_file(f"{root}/data/p03.parquet", content=DataFileContent.POSITION_DELETES,
                                   lower_bounds={2147483546: path}, upper_bounds={2147483546: path}),
        _data_file(f"{root}/data/p-all.parquet", content=DataFileContent.POSITION_DELETES),
        _data_file(f"{root}/data/eq.parquet", content=DataFileContent.EQUALITY_DELETES, equality_ids=[1]))])
    with write_manifest(2, UNPARTITIONED_PARTITION_SPEC, SCHEMA, io.new_output(f"{root}/metadata/data-3.avro"),
                        snapshot_id=3, avro_compression="deflate") as writer:
        for n in range(25):
            data = _data_file(f"{root}/data/d{n:02}.parquet", 10 * n, 10 * n + 9)
            if n < 15:
                writer.existing(ManifestEntry.from_args(status=ManifestEntryStatus.EXISTING, snapshot_id=1,
                                                        sequence_number=1, file_sequence_number=1, data_file=data))
            else:
                writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=3, data_file=data))
            if n == 5:
                writer.delete(ManifestEntry.from_args(status=ManifestEntryStatus.EXISTING, snapshot_id=1, sequence_number=1,
                                                      file_sequence_number=1,
                                                      data_file=_data_file(f"{root}/data/gone.parquet", 0, 999)))
    data = _listed(io, f"{root}/metadata/snap-3.avro", 3, 3, [writer.to_manifest_file(), *older])
    newest = deletes("deletes-4", 4, _data_file(f"{root}/data/p-4.parquet", content=DataFileContent.POSITION_DELETES))
    listing = f"{root}/metadata/snap-4.avro"
    _listed(io, listing, 4, 4, [*data, newest])
    snapshot = Snapshot(**{"snapshot-id": 4, "sequence-number": 4, "timestamp-ms": 1, "manifest-list": listing,
                           "summary": Summary(Operation.APPEND), "schema-id": 0})
    metadata = new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, root, {})
    metadata = metadata.model_copy(update={"snapshots": [snapshot], "current_snapshot_id": 4, "last_sequence_number": 4})
    return Scope(metadata, snapshot, None, row_filter if row_filter is not None else AlwaysTrue(), True)


def _tasks(*answers: Planned) -> list[tuple[str, list[str]]]:
    """Every file scan task of ``answers`` as (data file, its delete files), sorted."""
    return sorted((t["data-file"]["file-path"].rsplit("/", 1)[1],
                   sorted(a.delete_files[r]["file-path"].rsplit("/", 1)[1] for r in t.get("delete-file-references", [])))
                  for a in answers for t in a.file_scan_tasks)


def _planned(found: Scope, io, data, deletes, group=None) -> Planned:
    chosen = data if group is None else parts(data, group)
    return plan(found, io, chosen, deletes, Residuals(found.filter, 1 << 20), threading.Event())


def test_a_manifest_over_files_per_task_is_planned_in_parts_whose_union_is_the_whole_plan(tmp_path: Path):
    """Before issue 50 the one manifest was one plan task: a first answer of all 25 files."""
    found, io = _one_big_manifest(tmp_path), PyArrowFileIO()
    labels = ("unit", "parts")
    cache = ManifestCache(64 * 1024 * 1024, labels)
    data, deletes = manifests(found, io, cache)
    assert [(m.added_files_count, m.existing_files_count) for m in data] == [(10, 15)] and len(deletes) == 2
    whole = _planned(found, io, data, deletes)  # the plan of the whole table as one task
    existing = ["eq.parquet", "p-4.parquet", "p-all.parquet"]
    assert _tasks(whole) == sorted([(f"d{n:02}.parquet", sorted([*existing, "p03.parquet"]) if n == 3 else existing)
                                    for n in range(15)] + [(f"d{n}.parquet", ["p-4.parquet"]) for n in range(15, 25)])
    groups = slices(data, 10)
    assert groups == [Slice(0, 1, 0, 10), Slice(0, 1, 10, 20), Slice(0, 1, 20, 25)]
    first = first_answer(found, io, data, deletes, 10, lambda group: group,
                         Residuals(found.filter, 1 << 20), threading.Event())
    assert len(first.file_scan_tasks) == 10 and first.plan_tasks == groups[1:]
    rest = [_planned(found, io, data, deletes, group) for group in first.plan_tasks]
    assert [len(answer.file_scan_tasks) for answer in rest] == [10, 5]
    assert _tasks(first, *rest) == _tasks(whole)  # each file once, with exactly its deletes
    # each answer's delete files are those its tasks reference
    for answer in (first, *rest):
        assert sorted(d["file-path"] for d in answer.delete_files) == sorted(
            {answer.delete_files[r]["file-path"] for t in answer.file_scan_tasks for r in t["delete-file-references"]})
    # the manifest list and the three manifests read once each: every part after reads the cache
    assert _lookups(labels, "miss") == 4


def test_parts_of_several_manifests_keep_each_answer_within_files_per_task(tmp_path: Path):
    """Before: the first answer planned manifests until it held files_per_task tasks, so three
    manifests of 9 files gave a first answer of 18 at 10 per task."""
    listing = _manifests(tmp_path, 3, 9)
    io = PyArrowFileIO()
    data = ManifestCache(64 * 1024 * 1024, ("unit", "bounded-answers")).manifests(io, listing)
    found = _scope(tmp_path)
    first = first_answer(found, io, data, [], 10, lambda group: group, Residuals(found.filter, 1 << 20),
                         threading.Event())
    assert len(first.file_scan_tasks) == 9 and first.plan_tasks == [Slice(1, 2), Slice(2, 3)]
    rest = [_planned(found, io, data, [], group) for group in first.plan_tasks]
    assert [len(a.file_scan_tasks) for a in rest] == [9, 9] and len({t[0] for t in _tasks(first, *rest)}) == 27
    # a filter that prunes most files is still answered whole: every part fits
    one = _scope(tmp_path, GreaterThan("id", 0))
    assert len(first_answer(one, io, data, [], 30, lambda group: group, Residuals(one.filter, 1 << 20),
                            threading.Event()).file_scan_tasks) == 27


def test_a_filter_prunes_inside_a_part(tmp_path: Path):
    found = _one_big_manifest(tmp_path, And(GreaterThanOrEqual("id", 125), LessThan("id", 165)))
    io = PyArrowFileIO()
    data, deletes = manifests(found, io, ManifestCache(64 * 1024 * 1024, ("unit", "pruned-part")))
    assert [t[0] for t in _tasks(_planned(found, io, data, deletes, Slice(0, 1, 10, 20)))] == [
        f"d{n}.parquet" for n in range(12, 17)]
    assert _tasks(_planned(found, io, data, deletes, Slice(0, 1, 0, 10))) == []
    first = first_answer(found, io, data, deletes, 10, lambda group: group, Residuals(found.filter, 1 << 20),
                         threading.Event())
    assert first.plan_tasks == [] and _tasks(first) == _tasks(_planned(found, io, data, deletes))
    assert len(first.file_scan_tasks) == 5


def test_a_part_reads_to_the_manifest_s_end_and_only_what_the_manifest_holds():
    class Cut(_Manifest):
        def part(self, first, last):
            return (first, last)
    data = [Cut(3), Cut(25)]
    assert parts(data, Slice(1, 2, 20, 25)) == [(20, None)]  # the last part: to the end, whatever the count
    assert parts(data, Slice(1, 2, 10, 20)) == [(10, 20)]
    assert parts(data, Slice(0, 2)) == data
    for bad in (Slice(0, 0), Slice(1, 0), Slice(0, 3), Slice(2, 3), Slice(1, 2, 20, 26), Slice(1, 2, 10, 10),
                Slice(1, 2, 12, 10), Slice(0, 2, 0, 2), Slice(1, 2, 0, None), Slice(1, 2, None, 3)):
        assert parts(data, bad) is None, bad


class _Service:
    """The four handlers' catalog for ``etl`` over a real table (:func:`_one_big_manifest`), its
    policy checks and vending faked: planning, plan tasks and the plan cache are the gateway's."""

    def __init__(self, monkeypatch, found: Scope, files_per_task: int):
        from gateway.iceberg import scan_plans
        from gateway.iceberg.plan_executor import PlanExecutor
        from gateway.iceberg.read_rules import Readable
        from gateway.iceberg.service_state import ServiceState

        self.table = Readable(f"{found.metadata.location}/metadata/4.metadata.json", found.metadata, None)

        async def readable(catalog, db, name):
            return self.table

        async def delegated(catalog, request, db, name, location):
            return None, []
        monkeypatch.setattr(scan_plans, "readable", readable)
        monkeypatch.setattr(scan_plans, "delegated", delegated)
        monkeypatch.setattr(scan_plans, "file_io", lambda properties, location: PyArrowFileIO())
        options = PlanningOptions(files_per_task=files_per_task)
        self.catalog = SimpleNamespace(user="etl", files=SimpleNamespace(properties={}), service=ServiceState(
            planning=options, manifests=ManifestCache(64 * 1024 * 1024, ("unit", "handlers")),
            planner=PlanExecutor(2, 2), answers=PlanCache(1 << 20, 60.0, ("unit", "handlers"))))

    async def plan(self) -> dict:
        from gateway.iceberg.paths import RouteMatch
        from gateway.iceberg.scan_plans import plan_table_scan
        reply = await plan_table_scan(self.catalog, RouteMatch("planTableScan", "db", "t"), None, PlanTableScanRequest())
        return json.loads(reply.body.model_dump_json(by_alias=True))

    async def tasks(self, token: str) -> dict:
        from gateway.iceberg.paths import RouteMatch
        from gateway.iceberg.plan_models import FetchScanTasksRequest
        from gateway.iceberg.scan_plans import fetch_scan_tasks
        reply = await fetch_scan_tasks(self.catalog, RouteMatch("fetchScanTasks", "db", "t"), None,
                                       FetchScanTasksRequest.model_validate({"plan-task": token}))
        return json.loads(reply.body.model_dump_json(by_alias=True))


def _answer(values: dict) -> Planned:
    return Planned(values.get("delete-files") or [], values.get("file-scan-tasks") or [])


async def test_plan_tasks_name_a_manifest_s_entries_and_an_edited_one_is_404(tmp_path: Path, monkeypatch):
    """Through the handlers: the plan answers 10 tasks and two plan tasks naming entries 10–20 and
    20–25 of the one manifest; each fetched answers its part (the plan cache keyed by the part:
    the second is not the first's answer), together the whole plan; a plan task whose entries are
    edited into anything else is 404 ``NoSuchPlanTaskException``, never a 500."""
    found = _one_big_manifest(tmp_path)
    service = _Service(monkeypatch, found, 10)
    first = await service.plan()
    assert first["status"] == "completed" and len(first["file-scan-tasks"]) == 10
    tokens = first["plan-tasks"]
    assert [(decode(t, TASK)["m"], decode(t, TASK)["e"]) for t in tokens] == [([0, 1], [10, 20]), ([0, 1], [20, 25])]
    fetched = [await service.tasks(token) for token in tokens]
    assert [len(f["file-scan-tasks"]) for f in fetched] == [10, 5]
    assert await service.tasks(tokens[1]) == fetched[1]  # from the plan cache, the part's own answer
    io = PyArrowFileIO()
    data, deletes = manifests(found, io, ManifestCache(0))
    assert _tasks(_answer(first), *map(_answer, fetched)) == _tasks(_planned(found, io, data, deletes))
    payload = decode(tokens[0], TASK)
    edits = [{"e": [-1, 5]}, {"e": [20, 10]}, {"e": [10, 10]}, {"e": [20, 26]}, {"e": ["10", 20]}, {"e": [10.0, 20]},
             {"e": [True, 20]}, {"e": [10, 20, 25]}, {"e": None}, {"e": 10}, {"m": [0, 2]}, {"m": [1, 2]},
             {"m": [0, 1, 2]}, {"m": [-1, 0]}, {"m": [1, 0], "e": [0, 5]}]
    for edit in edits:
        with pytest.raises(errors.NoSuchPlanTask):
            await service.tasks(encode({**payload, **edit}))
    without = {k: v for k, v in payload.items() if k != "e"}
    for edit in ({"m": [1, 2]}, {"m": [0, 0]}, {"m": [1, 0]}):
        with pytest.raises(errors.NoSuchPlanTask):
            await service.tasks(encode({**without, **edit}))
    # the manifest whole, as a plan task of whole manifests names it: a plan the caller could ask for
    assert len((await service.tasks(encode(without)))["file-scan-tasks"]) == 25
