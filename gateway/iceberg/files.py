"""Iceberg metadata files, read and written with PyIceberg's ``FileIO`` (``load_file_io``: the
scheme of the location picks it; ``file://`` and local paths are PyArrow's local filesystem)
off the event loop (``asyncio.to_thread``; FileIO is blocking).

Metadata file names are PyIceberg's: ``<table location>/metadata/<version>-<uuid>.metadata.json``
with a version one above the base's (``LocationProvider.new_table_metadata_file_location``).
A write never overwrites (``create(overwrite=False)``): a name taken means a clash, not data
to replace.

View metadata files are named as Java's ``BaseViewOperations`` names them:
``<view location>/metadata/<version>-<uuid><extension>`` (or below ``write.metadata.path``),
the extension ``.gz.metadata.json`` (gzip, the default of ``write.metadata.compression-codec``
for views) or ``.metadata.json`` (``none``), the version one above the base's.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import urlsplit

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.io import load_file_io
from pyiceberg.serializers import Compressor, FromInputFile, ToOutputFile
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.view.metadata import ViewMetadata

VIEW_COMPRESSION, VIEW_METADATA_PATH = "write.metadata.compression-codec", "write.metadata.path"
_VIEW_EXTENSIONS = {"gzip": ".gz.metadata.json", "none": ".metadata.json"}


def file_io(properties: Mapping[str, str], location: str):
    """PyIceberg's FileIO for ``location`` with ``properties``, built once per properties and
    scheme (:func:`pyiceberg.io.load_file_io` builds a new one, with its own filesystem and
    connections, on every call)."""
    return _file_io(tuple(sorted(properties.items())), urlsplit(location).scheme.lower() or "file")


@lru_cache(maxsize=64)
def _file_io(properties: tuple[tuple[str, str], ...], scheme: str):
    return load_file_io(dict(properties), f"{scheme}://io/")


class MetadataFiles:
    """Reads and writes metadata files with FileIO ``properties`` (the service's ``file_io``
    options, then the table's own properties)."""

    def __init__(self, properties: Mapping[str, str] | None = None):
        self.properties = dict(properties or {})

    def _io(self, location: str, table_properties: Mapping[str, str] | None = None):
        return file_io({**self.properties, **(table_properties or {})}, location)

    async def read(self, location: str) -> TableMetadata:
        """The table metadata in the file at ``location``. Raises ``OSError`` (missing or
        unreadable) and ``ValueError``/``pydantic.ValidationError`` (not table metadata)."""
        def load() -> TableMetadata:
            return FromInputFile.table_metadata(self._io(location).new_input(location))
        return await asyncio.to_thread(load)

    async def write(self, metadata: TableMetadata, location: str) -> None:
        """Write ``metadata`` to a new file at ``location``. Raises ``FileExistsError``, ``OSError``."""
        def store() -> None:
            ToOutputFile.table_metadata(metadata, self._io(location, metadata.properties).new_output(location))
        await asyncio.to_thread(store)

    async def read_view(self, location: str) -> ViewMetadata:
        """The view metadata in the file at ``location`` (gzip when its name says so). Raises
        ``OSError`` and ``ValueError``/``pydantic.ValidationError`` (not view metadata)."""
        def load() -> ViewMetadata:
            with self._io(location).new_input(location).open() as stream:
                with Compressor.get_compressor(location).stream_decompressor(stream) as data:
                    return ViewMetadata.model_validate_json(data.read())
        return await asyncio.to_thread(load)

    async def write_view(self, metadata: ViewMetadata, location: str) -> None:
        """Write view ``metadata`` to a new file at ``location``. Raises ``FileExistsError``, ``OSError``."""
        def store() -> None:
            data = Compressor.get_compressor(location).bytes_compressor()(metadata.model_dump_json().encode())
            with self._io(location, metadata.properties).new_output(location).create(overwrite=False) as stream:
                stream.write(data)
        await asyncio.to_thread(store)

    async def delete(self, location: str) -> None:
        """Delete the file at ``location``; a missing file is fine. Raises ``OSError``."""
        def remove() -> None:
            try:
                self._io(location).delete(location)
            except FileNotFoundError:
                pass
        await asyncio.to_thread(remove)

    async def purge(self, metadata: TableMetadata, location: str) -> int:
        """Delete every file a dropped table's metadata reaches: data and delete files of every
        snapshot's manifests, the manifests, manifest lists, statistics files, older metadata
        files (``metadata-log``) and ``location`` itself, as Iceberg's
        ``CatalogUtil.dropTableData`` does. Returns how many were deleted; missing ones are
        skipped. Raises ``OSError`` for other failures."""
        def remove_all() -> int:
            io = self._io(location, metadata.properties)
            paths: list[str] = []
            manifests: dict[str, object] = {}
            for snapshot in metadata.snapshots:
                for manifest in snapshot.manifests(io):
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
                try:
                    io.delete(path)
                    deleted += 1
                except FileNotFoundError:
                    pass
            return deleted
        return await asyncio.to_thread(remove_all)


def next_metadata_location(metadata: TableMetadata, base_location: str | None) -> str:
    """Where the metadata file after ``base_location`` (None: a new table's first) goes."""
    version = MetastoreCatalog._parse_metadata_version(base_location) + 1 if base_location else 0
    provider = load_location_provider(metadata.location, metadata.properties)
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
