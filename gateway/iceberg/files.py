"""Iceberg metadata files, read and written with the gateway's FileIO
(:mod:`gateway.lakehouse.file_io`: PyIceberg's fsspec FileIO for local and S3 locations, with
exclusive create; it does not import pyarrow) off the event loop (``asyncio.to_thread``; FileIO
is blocking).

The gateway is a deputy: its FileIO is built from the service's own options only (never from a
table's properties, which may name code, ``py-io-impl``, or steer its requests, ``s3.endpoint``),
and its location provider is PyIceberg's ``SimpleLocationProvider``, never one a property
names. Every file it writes lies below the table's (or view's) location; a purge deletes only
files below it (:meth:`MetadataFiles.purge`).

Metadata file names are PyIceberg's: ``<table location>/metadata/<version>-<uuid>.metadata.json``
with a version one above the base's (``LocationProvider.new_table_metadata_file_location``).
A write never overwrites (``create(overwrite=False)``): a name taken means a clash, not data
to replace, and Iceberg never rewrites one. So what a location held is what it holds for as long
as the file exists: the last :data:`_KEPT` table metadata files a process wrote or read are
kept parsed, by FileIO options and location (8 writers on one table parsed the same file
hundreds of times, issue 33; a repeated scan plan read and parsed the table's file each time,
issue 50). A kept file is taken from memory for :data:`TRUSTED_SECONDS` after it was last seen,
then its existence is checked again (a file deleted by another process is missing within that
time; one the gateway deletes, at once). ``register`` reads its file afresh
(:meth:`MetadataFiles.read`'s ``fresh``), as Iceberg's manifests are kept by path in
:mod:`gateway.iceberg.manifest_cache`.

View metadata files are named as Java's ``BaseViewOperations`` names them:
``<view location>/metadata/<version>-<uuid><extension>`` (or below ``write.metadata.path``),
the extension ``.gz.metadata.json`` (gzip, the default of ``write.metadata.compression-codec``
for views) or ``.metadata.json`` (``none``), the version one above the base's.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.serializers import Compressor, FromInputFile, ToOutputFile
from pyiceberg.table.locations import SimpleLocationProvider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.view.metadata import ViewMetadata

from gateway.iceberg import errors
from gateway.iceberg.local_paths import irregular, linked
from gateway.iceberg.locations import PATH_PROPERTIES, inside
from gateway.lakehouse.file_io import file_io

VIEW_COMPRESSION, VIEW_METADATA_PATH = "write.metadata.compression-codec", "write.metadata.path"
_VIEW_EXTENSIONS = {"gzip": ".gz.metadata.json", "none": ".metadata.json"}


log = logging.getLogger(__name__)

#: Table metadata files kept parsed per process (by count, as before issue 50: a file with
#: thousands of snapshots parses to megabytes, so the bound stays small).
_KEPT = 64
#: Seconds a kept file is taken from memory without checking that it still exists (Iceberg
#: Java's ``CachingCatalog`` keeps a loaded table 30 s by default, unchecked).
TRUSTED_SECONDS = 30.0
#: Largest metadata file read, bytes (Iceberg's own are far smaller; anything larger is not one).
MAX_METADATA_BYTES = 256 * 1024 * 1024
#: (FileIO options, location) → (the frozen metadata there, when it was last seen: monotonic
#: seconds), least recently used first.
_kept: OrderedDict[tuple[tuple, str], tuple[TableMetadata, float]] = OrderedDict()


class MetadataFiles:
    """Reads and writes metadata files with FileIO ``properties`` (the service's ``file_io``
    and S3 options; a table's own properties never reach it)."""

    def __init__(self, properties: Mapping[str, str] | None = None):
        self.properties = dict(properties or {})
        self._store = tuple(sorted(self.properties.items()))  # one location, two stores: two files

    def _io(self, location: str):
        return file_io(self.properties, location)

    async def read(self, location: str, fresh: bool = False) -> TableMetadata:
        """The table metadata in the file at ``location``, kept parsed (see the module
        docstring); ``fresh``: read and parsed now whatever is kept. Raises ``OSError``
        (missing or unreadable) and ``ValueError``/``pydantic.ValidationError`` (not table
        metadata)."""
        key = (self._store, location)
        found = None if fresh else _kept.get(key)
        if found is not None:
            metadata, seen = found
            if time.monotonic() - seen >= TRUSTED_SECONDS:
                if not await asyncio.to_thread(self._io(location).new_input(location).exists):
                    _kept.pop(key, None)  # deleted since, by another process
                    raise FileNotFoundError(f"no metadata file at {location[:300]}")
                _keep(key, metadata)
            else:
                _kept.move_to_end(key)
            return metadata
        def load() -> TableMetadata:
            return FromInputFile.table_metadata(_readable(self._io(location).new_input(location)))
        metadata = await asyncio.to_thread(load)
        _keep(key, metadata)
        return metadata

    async def write(self, metadata: TableMetadata, location: str) -> None:
        """Write ``metadata`` to a new file at ``location``. Raises ``FileExistsError``, ``OSError``."""
        _confined(location, metadata.location)
        def store() -> None:
            ToOutputFile.table_metadata(metadata, self._io(location).new_output(location))
        await asyncio.to_thread(store)
        _keep((self._store, location), metadata)

    async def read_view(self, location: str, fresh: bool = True) -> ViewMetadata:
        """The view metadata in the file at ``location`` (gzip when its name says so), read now
        (views are not kept: ``fresh`` is for :meth:`read`'s callers). Raises ``OSError`` and
        ``ValueError``/``pydantic.ValidationError`` (not view metadata)."""
        def load() -> ViewMetadata:
            with _readable(self._io(location).new_input(location)).open() as stream:
                with Compressor.get_compressor(location).stream_decompressor(stream) as data:
                    return ViewMetadata.model_validate_json(data.read())
        return await asyncio.to_thread(load)

    async def write_view(self, metadata: ViewMetadata, location: str) -> None:
        """Write view ``metadata`` to a new file at ``location``. Raises ``FileExistsError``, ``OSError``."""
        _confined(location, metadata.location)
        def store() -> None:
            data = Compressor.get_compressor(location).bytes_compressor()(metadata.model_dump_json().encode())
            with self._io(location).new_output(location).create(overwrite=False) as stream:
                stream.write(data)
        await asyncio.to_thread(store)

    async def delete(self, location: str) -> None:
        """Delete the file at ``location``; a missing file is fine. Raises ``OSError``."""
        def remove() -> None:
            try:
                self._io(location).delete(location)
            except FileNotFoundError:
                pass
        _kept.pop((self._store, location), None)
        await asyncio.to_thread(remove)

    async def purge(self, metadata: TableMetadata, location: str, table: str = "") -> int:
        """Delete the files a dropped table owns among those its metadata reaches: data and
        delete files of every snapshot's manifests, the manifests, manifest lists, statistics
        files, older metadata files (``metadata-log``) and ``location`` itself, as Iceberg's
        ``CatalogUtil.dropTableData`` does, but only those below the table's location
        (``metadata.location``): a reference elsewhere (another table's manifest list, any
        file, a file reached through a symbolic link below the location, a FIFO or a device) is
        neither read nor deleted, and is logged with its path (``table`` names the table in that
        line). Returns how many were deleted; missing ones are skipped. Raises ``OSError`` for
        other failures."""
        root = metadata.location

        def owned(path: str) -> bool:
            if inside(path, root) and not linked(path, root) and not irregular(path):
                return True
            log.warning("purge of %s skips %s: not below the table location %s (or reached through a "
                        "symbolic link)", table or root, path[:1024], root)
            return False

        def remove_all() -> int:
            io = self._io(location)
            paths: list[str] = []
            manifests: dict[str, object] = {}
            for snapshot in metadata.snapshots:
                if not owned(snapshot.manifest_list):
                    continue
                for manifest in snapshot.manifests(io):
                    if owned(manifest.manifest_path):
                        manifests.setdefault(manifest.manifest_path, manifest)
                paths.append(snapshot.manifest_list)
            for manifest in manifests.values():
                paths.extend(e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=False))
            paths.extend(manifests)
            paths.extend(s.statistics_path for s in metadata.statistics)
            paths.extend(s.statistics_path for s in metadata.partition_statistics)
            paths.extend(entry.metadata_file for entry in metadata.metadata_log)
            paths.append(location)
            deleted = 0
            for path in dict.fromkeys(paths):
                if not owned(path):
                    continue
                try:
                    io.delete(path)
                    deleted += 1
                except FileNotFoundError:
                    pass
            return deleted
        try:
            return await asyncio.to_thread(remove_all)
        finally:  # on the loop's thread, which alone uses the kept files
            for key in [k for k in _kept if k[0] == self._store and inside(k[1], root)]:
                _kept.pop(key, None)


def _keep(key: tuple[tuple, str], metadata: TableMetadata) -> None:
    _kept[key] = (metadata, time.monotonic())
    _kept.move_to_end(key)
    while len(_kept) > _KEPT:
        _kept.popitem(last=False)


def _readable(input_file):
    """``input_file`` (a PyIceberg ``InputFile``) when it is a regular file of at most
    :data:`MAX_METADATA_BYTES` (a FIFO or a device in a client's folder would hold a reading
    thread forever, a huge sparse file the memory). Raises ``OSError``, ``ValueError``."""
    if irregular(input_file.location):
        raise OSError(f"{input_file.location[:300]} is not a regular file")
    if len(input_file) > MAX_METADATA_BYTES:
        raise ValueError(f"{input_file.location[:300]} is larger than {MAX_METADATA_BYTES} bytes")
    return input_file


def _confined(path: str, location: str) -> None:
    """Refuse to write ``path`` unless it lies below ``location`` (the table's or view's), and
    reaches no folder through a symbolic link below it (on a local warehouse, clients write
    their own files there and could link elsewhere)."""
    if not inside(path, location):
        raise errors.Forbidden(f"{path[:300]} is not below the location {location[:300]}")
    if linked(path, location):
        raise errors.Forbidden(f"{path[:300]} is reached through a symbolic link below the location "
                               f"{location[:300]}")


def next_metadata_location(metadata: TableMetadata, base_location: str | None) -> str:
    """Where the metadata file after ``base_location`` (None: a new table's first) goes:
    ``SimpleLocationProvider``'s name for it (``write.metadata.path`` or
    ``<location>/metadata``), whatever provider the properties name."""
    version = MetastoreCatalog._parse_metadata_version(base_location) + 1 if base_location else 0
    paths = {key: value for key, value in metadata.properties.items() if key in PATH_PROPERTIES}
    provider = SimpleLocationProvider(metadata.location, paths)
    return provider.new_table_metadata_file_location(version)


def next_view_metadata_location(metadata: ViewMetadata, base_location: str | None) -> str:
    """Where a view's metadata file after ``base_location`` (None: a new view's first) goes.
    Raises ``ValueError`` for an unknown ``write.metadata.compression-codec``."""
    codec = metadata.properties.get(VIEW_COMPRESSION, "gzip").lower()
    if codec not in _VIEW_EXTENSIONS:
        raise ValueError(f"unsupported {VIEW_COMPRESSION} {codec[:40]!r}: gzip or none")
    version = _view_version(base_location) + 1 if base_location else 0
    directory = metadata.properties.get(VIEW_METADATA_PATH) or f"{metadata.location.rstrip('/')}/metadata"
    return f"{directory.rstrip('/')}/{version:05d}-{uuid.uuid4()}{_VIEW_EXTENSIONS[codec]}"


def _view_version(location: str) -> int:
    """The version in a view metadata file's name (the digits before its first ``-``), -1 when
    there is none (Java's ``BaseViewOperations.parseVersion``)."""
    head = location.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(head) if head.isdigit() and len(head) < 10 else -1
