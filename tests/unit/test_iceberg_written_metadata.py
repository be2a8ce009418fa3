"""Metadata files a process wrote are read from memory while they exist (gateway/iceberg/files.py,
issue 33): the same metadata, no parse; a file deleted since is missing, as on disk."""

from __future__ import annotations

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from gateway.iceberg import files
from gateway.iceberg.files import MetadataFiles, next_metadata_location


def _metadata(location: str):
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    return new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {})


async def test_a_written_file_is_read_from_memory_while_it_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_written", type(files._written)())
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    location = next_metadata_location(metadata, None)
    await io.write(metadata, location)
    assert await io.read(location) is metadata  # from memory
    assert await MetadataFiles().read(location) is metadata  # any reader of this process
    monkeypatch.setattr(files, "_written", type(files._written)())
    assert await io.read(location) == metadata  # parsed from the file: the same metadata

    await io.write(metadata, location2 := next_metadata_location(metadata, location))
    await io.delete(location2)
    with pytest.raises(FileNotFoundError):
        await io.read(location2)


async def test_only_the_last_written_files_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_written", type(files._written)())
    monkeypatch.setattr(files, "_WRITTEN", 2)
    io = MetadataFiles()
    metadata = _metadata(tmp_path.as_uri())
    locations = [next_metadata_location(metadata, None) for _ in range(3)]
    for location in locations:
        await io.write(metadata, location)
    assert list(files._written) == locations[1:]
