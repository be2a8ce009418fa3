"""The gateway's own FileIO for metadata files, manifests and purges on a local warehouse
(``file:`` locations and bare paths) and on S3 (``s3``, ``s3a``, ``s3n``): PyIceberg's
``FsspecFileIO`` (fsspec's local filesystem, s3fs), so serving Iceberg requests does not import
pyarrow (about 55 MiB per worker, which PyIceberg's ``PyArrowFileIO`` brings).

Three things PyIceberg's ``FsspecFileIO`` does not do as the gateway needs, fixed here:

* **Exclusive create.** ``OutputFile.create(overwrite=False)`` opens the file in ``"xb"`` mode
  after PyIceberg's existence check: locally ``O_CREAT | O_EXCL`` (two writers of one name:
  one wins, the other gets ``FileExistsError``), on S3 a ``PutObject`` with
  ``If-None-Match: *`` (s3fs; a store that already holds the key answers 412, raised as
  ``FileExistsError``). A metadata file name taken is a clash, never data to replace: a commit
  overwriting another's file would lose it.
* **Local existence.** fsspec's ``LocalFileSystem.lexists``, which PyIceberg's ``exists``
  calls, does not strip ``file://`` (it asks for a relative path ``file:/...`` and answers
  False), so PyIceberg's check before a create would never see a file: :class:`LocalFiles`
  strips it as fsspec's other local methods do.
* **Deletes** remove the one object named (``rm_file``: fsspec's ``rm`` expands ``[``, ``*``
  and ``?`` as a pattern, which could reach other files) and raise ``FileNotFoundError`` for a
  missing one, as PyArrow's FileIO does (S3 answers a delete of a missing key with success).

One thing it does that PyIceberg's does not, for speed (issue 50): :attr:`GatewayFileIO.whole`
reads each file whole in one request (:class:`WholeInputFile`; on S3 one ``GetObject``, where
fsspec's file asks ``HeadObject`` for the size first), for files a reader takes whole at once:
manifest lists and manifests, which PyIceberg's Avro reader reads to their end on opening
(:mod:`gateway.iceberg.manifest_cache`). Half the requests for a plan whose manifests are not
in memory.

``s3n://`` locations (Hadoop's old scheme, which s3fs does not take) are read as ``s3://``.
Other schemes (``gs``, ``abfs``, ``hdfs``...), and properties naming a FileIO (``py-io-impl``,
in the service's own options only: a client's never reach here), get PyIceberg's choice
(:func:`pyiceberg.io.load_file_io`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from functools import cached_property, lru_cache
from io import BytesIO
from urllib.parse import urlparse, urlsplit

from fsspec.implementations.local import LocalFileSystem
from pyiceberg.io import PY_IO_IMPL, FileIO, InputFile, OutputFile, load_file_io
from pyiceberg.io.fsspec import FsspecFileIO, FsspecInputFile, FsspecOutputFile
from pyiceberg.typedef import Properties

__all__ = ["GatewayFileIO", "LocalFiles", "SCHEMES", "WholeInputFile", "file_io", "load"]

#: Location schemes :class:`GatewayFileIO` serves (``""``: a bare local path).
SCHEMES = frozenset({"", "file", "s3", "s3a", "s3n"})


class LocalFiles(LocalFileSystem):
    """fsspec's local filesystem whose ``lexists`` takes ``file:`` URIs as its other methods do."""

    def lexists(self, path: str, **kwargs) -> bool:
        return super().lexists(self._strip_protocol(path), **kwargs)


def _local(_: Properties) -> LocalFiles:
    return LocalFiles(auto_mkdir=True)  # folders made as PyArrow's FileIO makes them


class ExclusiveOutputFile(FsspecOutputFile):
    """An ``FsspecOutputFile`` whose ``create(overwrite=False)`` never replaces a file."""

    def create(self, overwrite: bool = False):
        """A stream writing the file. Raises ``FileExistsError`` when ``overwrite`` is False and
        the file exists, now or when the stream is closed (S3), ``OSError``."""
        if overwrite:
            return super().create(overwrite=True)
        if self.exists():  # a store ignoring If-None-Match still gets this check
            raise FileExistsError(errno.EEXIST, "file exists", self.location)
        return self._fs.open(self.location, "xb")


class WholeInputFile(FsspecInputFile):
    """An ``FsspecInputFile`` whose stream holds the whole file, read in one request (s3fs:
    one ``GetObject``, no ``HeadObject`` for the size nor ranged reads), for a reader that reads
    it to its end at once anyway."""

    def open(self, seekable: bool = True) -> BytesIO:
        """The file's bytes as a stream. Raises ``FileNotFoundError`` (naming the location),
        ``OSError``."""
        try:
            return BytesIO(self._fs.cat_file(self.location, max_concurrency=1))  # s3fs: no size asked first
        except FileNotFoundError as exc:
            raise exc if exc.filename else FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT),
                                                             self.location) from exc


def _s3_form(location: str) -> str:
    return "s3://" + location[len("s3n://"):] if location[:6].lower() == "s3n://" else location


class GatewayFileIO(FsspecFileIO):
    """PyIceberg's ``FsspecFileIO`` with the fixes of the module docstring, built from the
    service's FileIO ``properties`` (``s3.*``: endpoint, region, the gateway's key)."""

    def __init__(self, properties: Properties):
        super().__init__(properties)
        self._scheme_to_fs[""] = self._scheme_to_fs["file"] = _local

    def new_input(self, location: str) -> FsspecInputFile:
        return super().new_input(_s3_form(location))

    @cached_property
    def whole(self) -> GatewayFileIO:
        """This FileIO with input files read whole in one request (:class:`WholeInputFile`)."""
        return _WholeReads(self.properties)

    def new_output(self, location: str) -> ExclusiveOutputFile:
        location = _s3_form(location)
        return ExclusiveOutputFile(location=location, fs=self._get_fs_from_uri(urlparse(location), location))

    def delete(self, location: str | InputFile | OutputFile) -> None:
        """Delete the one file at ``location``. Raises ``FileNotFoundError`` when it is missing,
        ``OSError`` (``IsADirectoryError``, ``PermissionError``...)."""
        path = _s3_form(location.location if isinstance(location, (InputFile, OutputFile)) else location)
        fs = self._get_fs_from_uri(urlparse(path), path)
        if not fs.lexists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        fs.rm_file(path)


class _WholeReads(GatewayFileIO):
    def new_input(self, location: str) -> WholeInputFile:
        location = _s3_form(location)
        return WholeInputFile(location=location, fs=self._get_fs_from_uri(urlparse(location), location))

    @property
    def whole(self) -> GatewayFileIO:
        return self


def load(properties: Mapping[str, str], scheme: str) -> FileIO:
    """The FileIO for locations of ``scheme`` (lower case; ``""`` for a bare path) with the
    service's ``properties``: :class:`GatewayFileIO` for :data:`SCHEMES`, else PyIceberg's
    choice (``load_file_io``), which also loads a ``py-io-impl`` the properties name."""
    if scheme in SCHEMES and PY_IO_IMPL not in properties:
        return GatewayFileIO(dict(properties))
    return load_file_io(dict(properties), f"{scheme or 'file'}://io/")


def file_io(properties: Mapping[str, str], location: str) -> FileIO:
    """The gateway's FileIO for ``location`` with ``properties`` (the service's options only;
    :func:`load`), built once per properties and scheme (each holds its own filesystems and
    connections)."""
    return _file_io(tuple(sorted(properties.items())), urlsplit(location).scheme.lower() or "file")


@lru_cache(maxsize=64)
def _file_io(properties: tuple[tuple[str, str], ...], scheme: str) -> FileIO:
    return load(dict(properties), scheme)
