"""Table metadata files a process wrote or read are kept parsed (gateway/iceberg/files.py, issues
33 and 50): the same metadata, no parse, no read; a file the gateway deletes is missing at once,
one deleted elsewhere once its trust lapses; ``fresh`` reads now; two stores keep apart."""

from __future__ import annotations

import os

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from gateway.iceberg import files
from gateway.iceberg.files import MetadataFiles, next_metadata_location


@pytest.fixture(autouse=True)
def kept(monkeypatch):
    monkeypatch.setattr(files, "_kept", type(files._kept)())
    return files._kept


def _metadata(location: str):
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    return new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {})


def _path(location: str) -> str:
    return location.removeprefix("file://")


async def test_a_written_file_is_read_from_memory(tmp_path):
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    location = next_metadata_location(metadata, None)
    await io.write(metadata, location)
    assert await io.read(location) is metadata  # from memory
    assert await MetadataFiles().read(location) is metadata  # any reader of this process with the same options
    fresh = await io.read(location, fresh=True)
    assert fresh == metadata and fresh is not metadata  # parsed from the file: the same metadata


async def test_a_read_file_is_kept_and_not_read_again(tmp_path, kept):
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    location = next_metadata_location(metadata, None)
    await io.write(metadata, location)
    kept.clear()
    first = await io.read(location)
    assert first == metadata and first is not metadata
    os.replace(_path(location), _path(location) + ".moved")  # within the trust: not looked at
    assert await io.read(location) is first


async def test_a_file_deleted_by_the_gateway_is_missing_at_once(tmp_path):
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    location = next_metadata_location(metadata, None)
    await io.write(metadata, location)
    await io.delete(location)
    with pytest.raises(FileNotFoundError):
        await io.read(location)


async def test_a_file_deleted_elsewhere_is_missing_once_its_trust_lapses(tmp_path, monkeypatch):
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    location = next_metadata_location(metadata, None)
    await io.write(metadata, location)
    os.remove(_path(location))  # another process
    assert await io.read(location) is metadata
    now = files.time.monotonic()
    monkeypatch.setattr(files.time, "monotonic", lambda: now + files.TRUSTED_SECONDS + 1)
    with pytest.raises(FileNotFoundError):
        await io.read(location)
    with pytest.raises(FileNotFoundError):  # and not kept after
        await io.read(location)


async def test_a_file_still_there_is_trusted_again(tmp_path, monkeypatch, kept):
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    location = next_metadata_location(metadata, None)
    await io.write(metadata, location)
    later = files.time.monotonic() + files.TRUSTED_SECONDS + 1
    monkeypatch.setattr(files.time, "monotonic", lambda: later)
    assert await io.read(location) is metadata
    assert next(iter(kept.values()))[1] == later


async def test_a_purge_forgets_the_files_it_deleted(tmp_path):
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    location = next_metadata_location(metadata, None)
    await io.write(metadata, location)
    await io.purge(metadata, location)
    with pytest.raises(FileNotFoundError):
        await io.read(location)


async def test_two_stores_keep_their_own_files(tmp_path, kept):
    metadata = _metadata(tmp_path.as_uri())
    location = next_metadata_location(metadata, None)
    await MetadataFiles({"s3.endpoint": "http://one"}).write(metadata, location)
    assert len(kept) == 1
    other = await MetadataFiles({"s3.endpoint": "http://two"}).read(location)
    assert other is not metadata and len(kept) == 2


async def test_only_the_last_files_are_kept(tmp_path, monkeypatch, kept):
    monkeypatch.setattr(files, "_KEPT", 2)
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    locations = [next_metadata_location(metadata, None) for _ in range(3)]
    for location in locations:
        await io.write(metadata, location)
    assert [k[1] for k in kept] == locations[1:]
    await io.read(locations[1])  # used: the newest now
    assert [k[1] for k in kept] == [locations[2], locations[1]]
