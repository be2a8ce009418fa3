"""The gateway's own queue per table, in front of HMS's lock queue: one commit per table per pod
asks HMS at a time, in arrival order within a process.

HMS 2.3 grants a waiting lock request only when its holder checks it again, so N writers polling
HMS at once make every turn as slow as the slowest poll (issue 33). In the queue, a commit
waits on an ``asyncio.Lock`` (first come, first served) in its worker, then on an exclusive
``flock`` of ``<runtime dir>/table-queue/<hash>`` across the workers of one gateway (the
supervisor's runtime directory, :func:`share`; a single process has nothing to share). Both die
with their holder: the kernel drops a dead process's ``flock``, so the queue never outlives it.

The queue also remembers, while commits wait in it, the HMS table the last commit through it
altered and when that alter was sent (:func:`altered`): a waiter whose base was read before
then takes that as the table at its turn (:func:`altered_since`) instead of asking HMS. Its
base is then older than that table (a table's metadata only moves forward under HMS's lock),
so a requirement that fails against it fails against HMS's current table too, short of a
rollback meanwhile (then a needless 409: the client reloads and retries, as after any 409).
What passes is checked again under HMS's lock, against HMS. Eight writers on one table: each
loser at its turn cost an HMS ``get_table`` before (issue 33).
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

__all__ = ["altered", "altered_since", "queued", "share"]

_shared: list[Path] = []
#: per table: [the process's lock, how many commits hold or wait for it, the last
#: ``(monotonic time the alter was sent, HMS table)`` or None]
_local: dict[str, list] = {}


def share(runtime_dir: Path) -> None:
    """Queue across the processes sharing ``runtime_dir`` (a worker, at start; the directory
    ``table-queue`` is created, private to the user). Raises ``OSError``."""
    path = runtime_dir / "table-queue"
    path.mkdir(mode=0o700, exist_ok=True)
    _shared[:] = [path]


def _key(db: str, table: str) -> str:
    return hashlib.sha256(f"{db.lower()}\0{table.lower()}".encode()).hexdigest()[:32]


async def _flock(fd: int) -> bool:
    """``flock(fd, LOCK_EX)`` without blocking the loop; whether it had to wait. A blocked wait runs in a thread of its
    own (never the shared executor, which the holder may need); when the waiter is cancelled,
    the thread closes ``fd`` itself as soon as it gets the lock, so nothing keeps it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            os.close(fd)
            raise
    loop = asyncio.get_running_loop()
    got = loop.create_future()

    def hand_over(error: OSError | None) -> None:  # on the loop
        if got.cancelled() or error is not None:
            os.close(fd)
            if not got.cancelled():
                got.set_exception(error)
        else:
            got.set_result(None)

    def wait() -> None:  # in the thread
        error = None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            error = exc
        try:
            loop.call_soon_threadsafe(hand_over, error)
        except RuntimeError:  # the loop is closed: nobody will use the lock
            os.close(fd)

    threading.Thread(target=wait, name="table-queue", daemon=True).start()
    await got
    return True


def altered(db: str, table: str, hive_table, sent: float) -> None:
    """Remember ``hive_table``, the HMS table ``db.table`` was just altered to by the holder of
    its turn, for the commits waiting behind it; ``sent``: ``time.monotonic()`` before the alter
    was sent. Kept while commits hold or wait for the turn."""
    entry = _local.get(_key(db, table))
    if entry is not None:
        entry[2] = sent, hive_table


def altered_since(db: str, table: str, read: float):
    """The HMS table the last commit through this queue altered ``db.table`` to, when it sent
    that alter after ``read`` (``time.monotonic()`` after the caller's own read of the table
    returned), else None: then only HMS can tell the table's state."""
    entry = _local.get(_key(db, table))
    if entry is None or entry[2] is None or entry[2][0] <= read:
        return None
    return entry[2][1]


@asynccontextmanager
async def queued(db: str, table: str) -> AsyncIterator[bool]:
    """Hold the gateway's turn on ``db.table`` for the body; yields whether another commit was
    ahead (then the table may have moved meanwhile). Cancellation while waiting leaves the
    queue; raises ``OSError`` when the queue file cannot be opened."""
    key = _key(db, table)
    entry = _local.setdefault(key, [asyncio.Lock(), 0, None])
    entry[1] += 1
    try:
        waited = entry[0].locked()
        async with entry[0]:
            if not _shared:
                yield waited
                return
            fd = os.open(_shared[0] / key, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            waited = await _flock(fd) or waited  # closes fd itself when it fails or is cancelled
            try:
                yield waited
            finally:
                os.close(fd)  # drops the flock
    finally:
        entry[1] -= 1
        if entry[1] == 0:
            del _local[key]
