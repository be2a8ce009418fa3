"""Iceberg commits in HMS's notification log: the ``iceberg`` member of an ``ALTER_TABLE`` event.

Iceberg's ``HiveCatalog`` (Java ``HiveTableOperations``, PyIceberg ``HiveCatalog.commit_table``)
and the gateway's ``iceberg-rest`` service commit a table by one ``alter_table`` that moves its
``metadata_location`` parameter to a new metadata file. So an ``ALTER_TABLE`` event whose table
after the change has ``table_type=ICEBERG`` and another ``metadata_location`` than before is a
commit, whoever wrote it. :class:`IcebergCommits` reads the new metadata file (the gateway's
FileIO, :mod:`gateway.lakehouse.file_io`: bounded in size and time, cached by location, since a
metadata file never changes) and its current snapshot, and attaches :func:`commit_body` to the
event when the feed gives it to a client (:meth:`gateway.events.feed.ChangeFeed.detailed`): the feed keeps events as HMS
logged them, so starting the gateway reads no metadata file of the log's history; a client
that resumes from an old id has the commits it is given read then, once each. PyIceberg is
imported then too (:func:`file_io`), not when the kind is built.

Body (Iceberg REST spec names, kebab case)::

    {"identifier": {"namespace": [db], "name": table},
     "metadata-location": str, "previous-metadata-location": str | None,
     "user": str | None,          # the "user" member of HMS's message (the project's listener)
     "snapshot-id": int | None, "parent-snapshot-id": int | None, "sequence-number": int | None,
     "timestamp-ms": int | None, "operation": str | None, "summary": {str: str} | None,
     "new-snapshot": bool | None, # current snapshot differs from the previous file's (None: unknown)
     "error": str}                # only when the new metadata file could not be read
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway.events.hcat import table_parameters
from gateway.upstream.notification_messages import MessageFormatError, gunzip
from gateway.upstream.notification_event import MetastoreEvent
from gateway.lakehouse.table_parameters import ICEBERG, METADATA_LOCATION, PREVIOUS_METADATA_LOCATION, TABLE_TYPE
from gateway.lakehouse.storage import S3Options, load_storage

__all__ = ["ICEBERG_COMMIT", "IcebergCommits", "IcebergCommitOptions", "MetadataUnreadable",
           "SnapshotReader", "commit_body", "commit_locations", "file_io_of", "for_viewer"]

log = logging.getLogger(__name__)

#: The ``types`` filter value that selects the ``ALTER_TABLE`` events carrying ``iceberg``.
ICEBERG_COMMIT = "ICEBERG_COMMIT"
#: Summary keys naming partitions (``partitions.<partition path>``, Iceberg's
#: ``write.summary.partition-limit``): a partition path holds column names and values.
_PARTITION_SUMMARY_PREFIX = "partitions."
#: Metadata files read at once (FileIO is blocking: each read holds a worker thread).
_PARALLEL_READS = 4


class IcebergCommitOptions(BaseModel):
    """``options.iceberg`` of an ``event-stream`` service.

    ``enabled``: attach Iceberg commits to ``ALTER_TABLE`` events; ``s3``: metadata files on S3
    read with the gateway's key from a credentials file or the environment, as the
    ``iceberg-rest`` kind's ``options.s3`` (:mod:`gateway.lakehouse.storage`; only ``endpoint``,
    ``region``, ``credentials_file``, ``profile`` and ``path_style`` matter here); ``file_io``:
    other PyIceberg FileIO properties for reading metadata files (they win over ``s3``'s; local
    files need none); ``max_metadata_bytes``: a larger metadata file is not read; ``cache_size``:
    metadata files remembered (by location), and commit bodies (by event); ``read_timeout_seconds``: per file.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    s3: S3Options | None = None
    file_io: dict[str, str] = Field(default_factory=dict, repr=False)
    max_metadata_bytes: int = Field(16 << 20, ge=1024, le=1 << 30)
    cache_size: int = Field(1024, ge=1, le=1_000_000)
    read_timeout_seconds: float = Field(10.0, gt=0, le=600)


def file_io_of(options: IcebergCommitOptions, base: Path) -> dict[str, str]:
    """The FileIO properties of ``options``: ``s3``'s (the gateway's key read now; a relative
    ``credentials_file`` is below ``base``), then ``file_io``'s. Raises ``ValueError(key,
    reason)`` as :func:`gateway.lakehouse.storage.load_storage`."""
    if options.s3 is None:
        return dict(options.file_io)
    return {**load_storage(options.s3, base).file_io(), **options.file_io}


def file_io(properties: Mapping[str, str], location: str):
    """The gateway's FileIO for ``location`` (:func:`gateway.lakehouse.file_io.file_io`), imported,
    PyIceberg with it, when the first metadata file is read: a worker serving the change feed
    holds PyIceberg (about 35 MiB) only once a client is given an Iceberg commit."""
    from gateway.lakehouse.file_io import file_io as load

    return load(properties, location)


class MetadataUnreadable(Exception):
    """A metadata file that cannot be read within the limits (missing, too large, not metadata).
    ``missing`` is True when the file does not exist."""

    def __init__(self, reason: str, *, missing: bool = False):
        super().__init__(reason)
        self.missing = missing


def commit_locations(event: MetastoreEvent) -> tuple[str, str | None] | None:
    """``(new, previous)`` metadata locations when ``event`` is an Iceberg commit, else None.

    A commit: ``ALTER_TABLE`` whose ``tableObjAfterJson`` has ``table_type=ICEBERG`` (any case)
    and a ``metadata_location`` other than ``tableObjBeforeJson``'s. ``previous`` is the
    before-table's location, else the after-table's ``previous_metadata_location``.
    """
    if event.event_type != "ALTER_TABLE" or not isinstance(event.message, dict):
        return None
    after = table_parameters(event.message.get("tableObjAfterJson")) or {}
    before = table_parameters(event.message.get("tableObjBeforeJson")) or {}
    new = after.get(METADATA_LOCATION)
    if str(after.get(TABLE_TYPE, "")).lower() != ICEBERG or not isinstance(new, str) or not new:
        return None
    previous = before.get(METADATA_LOCATION) or after.get(PREVIOUS_METADATA_LOCATION)
    if previous == new:
        return None
    return new, previous if isinstance(previous, str) else None


class SnapshotReader:
    """The current snapshot of metadata files, read with PyIceberg ``FileIO`` within the
    :class:`IcebergCommitOptions` limits and kept in an LRU cache by location."""

    def __init__(self, options: IcebergCommitOptions, file_io: dict[str, str] | None = None):
        self.options = options
        #: The FileIO properties files are read with (``options.file_io`` unless given: with
        #: ``options.s3``, the service adds the gateway's key, :func:`file_io_of`).
        self.file_io = options.file_io if file_io is None else file_io
        self._cache: OrderedDict[str, dict[str, Any] | None] = OrderedDict()
        self._slots = asyncio.Semaphore(_PARALLEL_READS)
        self.reads = 0  # files actually read, for tests

    def _load(self, location: str) -> dict[str, Any] | None:
        from pyiceberg.exceptions import ValidationError as MetadataInvalid  # at first use, as file_io
        from pyiceberg.table.metadata import TableMetadataUtil

        limit = self.options.max_metadata_bytes
        try:
            source = file_io(self.file_io, location).new_input(location)
            size = len(source)
            if size > limit:
                raise MetadataUnreadable(f"{size} bytes, more than max_metadata_bytes {limit}")
            with source.open() as stream:
                data = stream.read(limit + 1)
            if location.endswith(".gz.metadata.json"):
                data = gunzip(data, limit)
            if len(data) > limit:
                raise MetadataUnreadable(f"more than max_metadata_bytes {limit}")
            metadata = TableMetadataUtil.parse_raw(data)
        except MetadataUnreadable:
            raise
        except (OSError, ValueError, MessageFormatError, MetadataInvalid) as exc:
            raise MetadataUnreadable(f"{type(exc).__name__}: {str(exc)[:200]}",
                                     missing=isinstance(exc, FileNotFoundError)) from None
        snapshot = metadata.current_snapshot()
        if snapshot is None:
            return None
        summary = snapshot.summary
        return {
            "snapshot-id": snapshot.snapshot_id, "parent-snapshot-id": snapshot.parent_snapshot_id,
            "sequence-number": snapshot.sequence_number, "timestamp-ms": snapshot.timestamp_ms,
            "operation": summary.operation.value if summary is not None else None,
            "summary": ({"operation": summary.operation.value, **summary.additional_properties}
                        if summary is not None else None),
        }

    async def current_snapshot(self, location: str) -> dict[str, Any] | None:
        """The current snapshot of the file at ``location`` (``snapshot-id``, ``parent-snapshot-id``,
        ``sequence-number``, ``timestamp-ms``, ``operation``, ``summary``), None when the table
        has none. Raises :class:`MetadataUnreadable`."""
        if location in self._cache:
            self._cache.move_to_end(location)
            return self._cache[location]
        async with self._slots:
            if location in self._cache:  # read meanwhile by another commit of the batch
                return self._cache[location]
            self.reads += 1
            try:
                found = await asyncio.wait_for(asyncio.to_thread(self._load, location),
                                               self.options.read_timeout_seconds)
            except TimeoutError:
                raise MetadataUnreadable(f"not read within {self.options.read_timeout_seconds:g} s") from None
            except MetadataUnreadable:
                raise
            except Exception as exc:  # a file PyIceberg fails on unexpectedly: unreadable, not a failed request
                log.exception("metadata file %s: reading failed", location)
                raise MetadataUnreadable(f"{type(exc).__name__} while reading") from None
        self._cache[location] = found
        if len(self._cache) > self.options.cache_size:
            self._cache.popitem(last=False)
        return found


async def commit_body(event: MetastoreEvent, reader: SnapshotReader) -> dict[str, Any] | None:
    """The ``iceberg`` member of ``event`` (module docstring), None when it is not a commit."""
    locations = commit_locations(event)
    if locations is None:
        return None
    new, previous = locations
    user = event.message.get("user")
    body: dict[str, Any] = {
        "identifier": {"namespace": [event.db], "name": event.table},
        "metadata-location": new, "previous-metadata-location": previous,
        "user": user if isinstance(user, str) else None,
        "snapshot-id": None, "parent-snapshot-id": None, "sequence-number": None, "timestamp-ms": None,
        "operation": None, "summary": None, "new-snapshot": None,
    }
    try:
        snapshot = await reader.current_snapshot(new)
    except MetadataUnreadable as exc:
        body["error"] = f"metadata file unreadable: {exc}"
        # A missing file is what replaying the log meets for every commit of a table purged
        # since (or a file expired since): expected, so not a warning at every start.
        log.log(logging.INFO if exc.missing else logging.WARNING, "Iceberg commit %s (%s.%s): %s",
                event.event_id, event.db, event.table, body["error"])
        return body
    if snapshot is not None:
        body.update(snapshot)
    if previous is not None:
        try:
            before = await reader.current_snapshot(previous)
        except MetadataUnreadable:
            return body  # new-snapshot stays unknown
        body["new-snapshot"] = (None if snapshot is None else snapshot["snapshot-id"]) != (
            None if before is None else before["snapshot-id"])
    elif snapshot is not None:
        body["new-snapshot"] = True
    return body


def for_viewer(body: Mapping[str, Any], keep: Callable[[str], bool] | None) -> dict[str, Any]:
    """``body`` for a user with denied columns (``keep`` is not None): summary keys naming
    partitions (``partitions.<path>``, which hold partition columns and values) are dropped."""
    out = dict(body)
    if keep is not None and isinstance(out.get("summary"), dict):
        out["summary"] = {k: v for k, v in out["summary"].items() if not k.startswith(_PARTITION_SUMMARY_PREFIX)}
    return out


class IcebergCommits:
    """Completes change-feed events with their Iceberg commit (``details`` of
    :class:`~gateway.events.feed.ChangeFeed`): :meth:`detailed` attaches ``iceberg`` to the
    commits among the events it is given, reading their metadata files then.

    A commit's body is computed once and remembered for the last ``options.cache_size``
    commits (concurrent deliveries of one event share one read), so an unreadable file is
    tried, and logged, once per commit rather than once per client.
    """

    def __init__(self, options: IcebergCommitOptions, file_io: dict[str, str] | None = None):
        self.reader = SnapshotReader(options, file_io)
        self._size = options.cache_size
        self._bodies: OrderedDict[tuple, asyncio.Future] = OrderedDict()

    def _body(self, event: MetastoreEvent) -> asyncio.Future | None:
        """The future of ``event``'s ``iceberg`` member, None when it is not a commit."""
        locations = commit_locations(event)
        if locations is None:
            return None
        # Keyed by what the body says, not the id alone: an HMS reset reuses ids.
        user = event.message.get("user")
        key = (event.event_id, event.db, event.table, *locations, user if isinstance(user, str) else None)
        found = self._bodies.get(key)
        if found is None:
            found = asyncio.ensure_future(commit_body(event, self.reader))
            self._bodies[key] = found
            if len(self._bodies) > self._size:
                self._bodies.popitem(last=False)
        else:
            self._bodies.move_to_end(key)
        return found

    async def detailed(self, events: Sequence[MetastoreEvent]) -> list[MetastoreEvent]:
        """``events``, the Iceberg commits among them with their ``iceberg`` member
        (:func:`commit_body`; an unreadable metadata file gives a body with ``error``)."""
        bodies = [self._body(event) for event in events]
        out = []
        for event, body in zip(events, bodies):
            # shield: a client that leaves does not cancel the read other clients share
            out.append(event if body is None else dataclasses.replace(event, iceberg=await asyncio.shield(body)))
        return out

