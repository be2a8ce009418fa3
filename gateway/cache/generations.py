"""Generation counters that make cached replies exact across worker processes.

A cached reply remembers the counters it was filled under; a write or an event bumps the
counters of what it touches, and an entry whose counters moved is a miss. The counters are
64-bit integers in one shared mapping: slot 0 is the global epoch (bumped to drop everything),
slot 1 the database list, and the others are buckets hashed (CRC-32, the same in every process)
from a database (``db``), the table listing of a database (``list``) or a table (``table``).
Two names in one bucket only cost an extra miss.

With ``workers`` above 1 the supervisor creates the mapping as a file in its runtime directory
before it starts the workers (:func:`create_shared`); each worker maps the same file
(:func:`attach_shared`), so a bump in one worker is seen by the next lookup in every worker.
A single process uses anonymous memory. Bumps take an ``flock`` on the file so that two workers
never write the same slot back to an older value; lookups only read.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import zlib
from pathlib import Path

__all__ = ["BUCKETS", "DATABASES", "EPOCH", "FILE_NAME", "Generations", "attach_shared",
           "create_shared", "database_slot", "generations", "listing_slot", "table_slot"]

#: Hashed buckets (8 bytes each): 32 KiB in all.
BUCKETS = 4096
EPOCH, DATABASES = 0, 1
_SLOTS = BUCKETS + 2
_SIZE = 8 * _SLOTS
_WORD = struct.Struct("<Q")
#: The file under the supervisor's runtime directory that holds the shared counters.
FILE_NAME = "cache-generations"


def _bucket(level: bytes, *names: str) -> int:
    key = level + b"\0" + b"\0".join(n.lower().encode("utf-8", "surrogatepass") for n in names)
    return 2 + zlib.crc32(key) % BUCKETS


def database_slot(db: str) -> int:
    """The slot of database ``db`` itself (case-insensitive, as HMS's names)."""
    return _bucket(b"db", db)


def listing_slot(db: str) -> int:
    """The slot of ``db``'s table listings."""
    return _bucket(b"list", db)


def table_slot(db: str, table: str) -> int:
    """The slot of table ``db.table`` and its partitions."""
    return _bucket(b"table", db, table)


class Generations:
    """The counters over ``buffer`` (an ``mmap`` of :data:`_SIZE` bytes); ``fd`` is the shared
    file's descriptor for the bump lock, or None for a single process."""

    def __init__(self, buffer: mmap.mmap, fd: int | None = None):
        self._buffer, self._fd = buffer, fd

    def read(self, slots: tuple[int, ...]) -> tuple[int, ...]:
        """The current values of ``slots``."""
        buffer, unpack = self._buffer, _WORD.unpack_from
        return tuple(unpack(buffer, 8 * slot)[0] for slot in slots)

    def bump(self, slots) -> None:
        """Add one to every slot of ``slots`` (an iterable of slot numbers)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            buffer = self._buffer
            for slot in set(slots):
                _WORD.pack_into(buffer, 8 * slot, _WORD.unpack_from(buffer, 8 * slot)[0] + 1)
        finally:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self._buffer.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def create_shared(runtime_dir: Path) -> Path:
    """Create the zeroed counter file in ``runtime_dir`` (the supervisor, before forking); its path."""
    path = runtime_dir / FILE_NAME
    with open(path, "wb") as out:
        out.write(bytes(_SIZE))
    return path


_current: list[Generations] = []


def attach_shared(path: Path) -> Generations:
    """Map the counter file at ``path`` (a worker); later :func:`generations` calls return it.
    Raises ``OSError`` when the file cannot be opened or has the wrong size."""
    fd = os.open(path, os.O_RDWR)
    try:
        if os.fstat(fd).st_size != _SIZE:
            raise OSError(f"{path}: {os.fstat(fd).st_size} bytes, expected {_SIZE}")
        table = Generations(mmap.mmap(fd, _SIZE), fd)
    except BaseException:
        os.close(fd)
        raise
    _current[:] = [table]
    return table


def generations() -> Generations:
    """This process's counters: the shared ones when :func:`attach_shared` ran, else private
    ones (created on first use)."""
    if not _current:
        _current.append(Generations(mmap.mmap(-1, _SIZE)))
    return _current[0]
