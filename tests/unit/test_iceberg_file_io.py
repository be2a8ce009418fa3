"""The gateway's own FileIO on local files (:mod:`gateway.lakehouse.file_io`): a create never
replaces a file, for every local form of a location (``file:///``, ``file:/``, a bare path),
even when a file appears between PyIceberg's existence check and the open; deletes take one
file and say when it is missing; other schemes and an operator's ``py-io-impl`` keep
PyIceberg's choice. S3 (the suite's real S3 server) is in tests/integration/test_iceberg_storage.py."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pyiceberg.io.fsspec import FsspecFileIO

from gateway.lakehouse.file_io import ExclusiveOutputFile, GatewayFileIO, file_io, load


def _forms(path: Path) -> list[str]:
    return [path.as_uri(), f"file:{path}", str(path)]


@pytest.mark.parametrize("form", range(3), ids=["file:///", "file:/", "bare path"])
def test_a_create_never_replaces_a_file(tmp_path: Path, form: int):
    location = _forms(tmp_path / "t" / "metadata" / "00001-a.metadata.json")[form]
    io = file_io({}, location)
    assert isinstance(io, GatewayFileIO)
    with io.new_output(location).create() as stream:  # its folders made, as PyArrow's FileIO does
        stream.write(b"first commit")
    assert io.new_input(location).exists() and io.new_output(location).exists()
    with pytest.raises(FileExistsError):
        io.new_output(location).create()
    assert io.new_input(location).open().read() == b"first commit" and len(io.new_input(location)) == 12
    with io.new_output(location).create(overwrite=True) as stream:
        stream.write(b"replaced")
    assert io.new_input(location).open().read() == b"replaced"


def test_plain_fsspec_would_overwrite_which_is_why_the_gateway_s_io_exists(tmp_path: Path):
    """The trap this module closes: fsspec's local ``lexists`` takes ``file:///x`` as a relative
    path, so PyIceberg's own FsspecFileIO sees no file and its create(overwrite=False) truncates it."""
    location = (tmp_path / "m.json").as_uri()
    (tmp_path / "m.json").write_bytes(b"first commit")
    plain = FsspecFileIO({})
    assert plain.new_output(location).exists() is False
    assert file_io({}, location).new_output(location).exists() is True


def test_a_file_made_after_the_existence_check_is_still_not_replaced(tmp_path: Path, monkeypatch):
    """Two writers of one name: both pass the check, the open (O_EXCL) lets one through."""
    location = (tmp_path / "metadata" / "00001-a.metadata.json").as_uri()
    io = file_io({}, location)
    monkeypatch.setattr(ExclusiveOutputFile, "exists", lambda self: False)
    barrier, outcomes = threading.Barrier(2), []

    def writer(body: bytes) -> None:
        barrier.wait()
        try:
            with io.new_output(location).create() as stream:
                stream.write(body)
            outcomes.append(body)
        except FileExistsError:
            outcomes.append(None)

    threads = [threading.Thread(target=writer, args=(body,)) for body in (b"commit a", b"commit b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [body for body in outcomes if body is not None]
    assert len(winners) == 1 and outcomes.count(None) == 1
    assert (tmp_path / "metadata" / "00001-a.metadata.json").read_bytes() == winners[0]


def test_a_delete_takes_one_file_and_says_when_it_is_missing(tmp_path: Path):
    (tmp_path / "d").mkdir()
    for name in ("a[1].avro", "a1.avro", "ab.avro"):
        (tmp_path / "d" / name).write_bytes(b"x")
    location = f"file://{tmp_path}/d/a[1].avro"  # taken literally, never percent-decoded
    io = file_io({}, location)
    io.delete(location)  # a name, not a pattern: a1.avro stays
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["a1.avro", "ab.avro"]
    with pytest.raises(FileNotFoundError):
        io.delete(location)
    with pytest.raises(FileNotFoundError):
        io.new_input(location).open()
    with pytest.raises(FileNotFoundError):
        len(io.new_input(location))
    assert io.new_input(location).exists() is False
    with pytest.raises(IsADirectoryError):
        io.delete((tmp_path / "d").as_uri())
    assert (tmp_path / "d").is_dir()


@pytest.mark.parametrize("form", range(3), ids=["file:///", "file:/", "bare path"])
def test_a_file_read_whole_holds_its_bytes_and_a_missing_one_is_named(tmp_path: Path, form: int):
    """Issue 50: manifests are read whole in one request (on S3 one ``GetObject``, checked in
    tests/integration/test_iceberg_storage.py); locally the same bytes as a stream's."""
    location = _forms(tmp_path / "m.avro")[form]
    (tmp_path / "m.avro").write_bytes(b"\x00manifest" * 1000)
    whole = file_io({}, location).whole
    assert isinstance(whole, GatewayFileIO) and whole.whole is whole
    assert whole.new_input(location).open().read() == file_io({}, location).new_input(location).open().read()
    (tmp_path / "m.avro").unlink()
    with pytest.raises(FileNotFoundError, match="m.avro"):
        whole.new_input(location).open()


def test_s3n_locations_are_read_as_s3():
    io = load({"s3.endpoint": "http://127.0.0.1:9", "s3.region": "us-east-1"}, "s3n")
    assert isinstance(io, GatewayFileIO)
    assert io.new_input("s3n://bucket/t/m.json").location == "s3://bucket/t/m.json"
    assert io.new_output("s3a://bucket/t/m.json").location == "s3a://bucket/t/m.json"


def test_other_schemes_and_an_operator_s_py_io_impl_keep_pyiceberg_s_choice():
    assert type(load({"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}, "file")) is FsspecFileIO
    assert not isinstance(load({}, "hdfs"), GatewayFileIO)
    assert isinstance(load({}, ""), GatewayFileIO) and isinstance(load({}, "s3a"), GatewayFileIO)
