"""Parsed manifest lists and manifests, kept in memory per ``iceberg-rest`` service: Iceberg never
rewrites a manifest list or a manifest in place (a change writes new files), so what a path
held once it holds for as long as it exists, and a plan over a table read a second time reads no
file (issue 42).

:class:`ManifestCache` is a least-recently-used map of path → PyIceberg's parsed objects
(``ManifestFile`` records of a manifest list; the live ``ManifestEntry`` records of a manifest,
as ``ManifestFile.fetch_manifest_entry`` returns them, sequence numbers and snapshot ids
inherited), bounded by an estimate of the memory they take (``planning.manifest_cache_mib``).
A manifest reaches PyIceberg's planner as a :class:`CachedManifest`, a ``ManifestFile`` whose
entries come from the cache, and which a plan watches (:meth:`CachedManifest.watched`: its
entries are not read once the plan is stopped) or reads a part of (:meth:`CachedManifest.part`:
a range of its entries, the manifest still read and kept whole); everything else about
planning is PyIceberg's own (:mod:`gateway.iceberg.planning`).

A manifest list or manifest not in the cache is read whole in one request where the FileIO is
the gateway's own (:attr:`~gateway.lakehouse.file_io.GatewayFileIO.whole`: one S3
``GetObject`` each, not a ``HeadObject`` and a ``GetObject``).

Lookups are counted (``hms_gateway_iceberg_manifest_cache_lookups_total{result}``, hit or
miss) and the held bytes are a gauge (``hms_gateway_iceberg_manifest_cache_bytes``). Reads run
in worker threads (PyIceberg's planner opens manifests on its executor): the map is guarded by
a lock, which is never held while a file is read.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntry, ManifestFile, read_manifest_list

from gateway.lakehouse.file_io import GatewayFileIO
from gateway.observability import metrics

MIB = 1024 * 1024
#: Estimated bytes of one parsed entry beside its path and statistics (a ``ManifestEntry`` and
#: its ``DataFile`` record, their lists, the partition record). With it the estimate of
#: bench/planning.py's manifests (50 entries, two columns' statistics) is within 1 % of what
#: tracemalloc counts for them under PyIceberg 0.12 (29.3 against 29.2 MiB for 199 manifests).
_ENTRY_BYTES = 2000
#: Estimated bytes of one column's statistics in a data file (dict slots, ints, bound bytes).
_STAT_BYTES = 90


def entry_bytes(entry: ManifestEntry) -> int:
    """An estimate of the memory ``entry`` holds (bytes): its fixed part, its path, and the
    column statistics it carries."""
    data = entry.data_file
    stats = sum(len(m) for m in (data.column_sizes, data.value_counts, data.null_value_counts,
                                 data.nan_value_counts, data.lower_bounds, data.upper_bounds) if m)
    bounds = sum(len(v) for m in (data.lower_bounds, data.upper_bounds) if m for v in m.values())
    return _ENTRY_BYTES + sys.getsizeof(data.file_path) + stats * _STAT_BYTES + bounds


class ManifestCache:
    """Parsed manifest lists and manifests by path, at most ``max_bytes`` (estimated; 0: keep
    nothing). ``labels`` (topology, service) name its metrics."""

    def __init__(self, max_bytes: int, labels: tuple[str, str] = ("", "")):
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self._hit = metrics.child(metrics.ICEBERG_MANIFEST_CACHE_LOOKUPS, *labels, "hit")
        self._miss = metrics.child(metrics.ICEBERG_MANIFEST_CACHE_LOOKUPS, *labels, "miss")
        self._gauge = metrics.child(metrics.ICEBERG_MANIFEST_CACHE_BYTES, *labels)

    def __len__(self) -> int:
        return len(self._items)

    def _get(self, path: str, load: Callable[[], tuple[Any, int]]) -> Any:
        with self._lock:
            found = self._items.get(path)
            if found is not None:
                self._items.move_to_end(path)
                self._hit.inc()
                return found[0]
        self._miss.inc()
        value, size = load()  # outside the lock: two threads may read one file once each
        if size > self.max_bytes:
            return value
        with self._lock:
            if path not in self._items:
                self._items[path] = (value, size)
                self.bytes += size
                while self.bytes > self.max_bytes:
                    _, (_, dropped) = self._items.popitem(last=False)
                    self.bytes -= dropped
            self._gauge.set(self.bytes)
        return value

    def manifests(self, io: FileIO, manifest_list: str) -> tuple[CachedManifest, ...]:
        """The manifests the manifest list at ``manifest_list`` names, as :class:`CachedManifest`
        records reading their entries through this cache. Raises what FileIO and PyIceberg's
        Avro reader raise (``OSError``, ``ValueError``...)."""
        def load() -> tuple[tuple[CachedManifest, ...], int]:
            found = tuple(CachedManifest.of(m, self) for m in read_manifest_list(_whole(io).new_input(manifest_list)))
            return found, 600 * len(found) + sum(sys.getsizeof(m.manifest_path) for m in found)
        return self._get(manifest_list, load)

    def entries(self, manifest: ManifestFile, io: FileIO) -> list[ManifestEntry]:
        """The live entries of ``manifest`` (PyIceberg's ``fetch_manifest_entry``, deleted
        entries left out). The list is shared: callers never change it nor its entries."""
        def load() -> tuple[list[ManifestEntry], int]:
            found = ManifestFile.fetch_manifest_entry(manifest, _whole(io), discard_deleted=True)
            return found, 64 + sum(entry_bytes(e) for e in found)
        return self._get(manifest.manifest_path, load)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0
            self._gauge.set(0)


def _whole(io: FileIO) -> FileIO:
    """``io`` reading files whole in one request where it is the gateway's own FileIO."""
    return io.whole if isinstance(io, GatewayFileIO) else io


class Stopped(Exception):
    """The plan reading a manifest was stopped (cancelled, dropped or expired)."""


class CachedManifest(ManifestFile):
    """A ``ManifestFile`` (the same record) whose live entries are read through a
    :class:`ManifestCache`, none once its ``stop`` flag is set, and only those of its ``window``
    when it has one (a slice of a large manifest: issue 50)."""

    cache: ManifestCache
    stop: threading.Event | None = None
    #: The live entries this copy gives (a ``slice`` of the cached list); None: all of them.
    window: slice | None = None

    @classmethod
    def of(cls, manifest: ManifestFile, cache: ManifestCache) -> CachedManifest:
        record = cls(*manifest._data)
        record.cache = cache
        return record

    def _copy(self, stop: threading.Event | None, window: slice | None) -> CachedManifest:
        record = CachedManifest.of(self, self.cache)
        record.stop, record.window = stop, window
        return record

    def watched(self, stop: threading.Event) -> CachedManifest:
        """A copy of this record for one plan: reading its entries raises :class:`Stopped` once
        ``stop`` is set (the shared record in the cache is left as it is)."""
        return self._copy(stop, self.window)

    def part(self, first: int, last: int | None) -> CachedManifest:
        """A copy of this record giving only its live entries ``first`` to ``last`` (offsets in
        the order the manifest holds them, ``last`` exclusive; None: to the end). The manifest
        is still read and kept once, whole."""
        return self._copy(self.stop, slice(first, last))

    def fetch_manifest_entry(self, io: FileIO, discard_deleted: bool = True) -> list[ManifestEntry]:
        if self.stop is not None and self.stop.is_set():
            raise Stopped
        if not discard_deleted:  # every entry, deleted ones too: a window counts live entries only
            if self.window is not None:
                raise ValueError("a part of a manifest holds live entries only")
            return super().fetch_manifest_entry(io, discard_deleted=False)
        entries = self.cache.entries(self, io)
        return entries if self.window is None else entries[self.window]
