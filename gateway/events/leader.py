"""One broker publisher across replicas: an HMS lock held while publishing, the offset in HMS.

Every replica of the gateway shares the metastore, so the metastore coordinates them (the
Kubernetes Lease would need an API server, which the gateway otherwise never talks to):

* **The lock** is an ``EXCLUSIVE`` ``TABLE`` lock (``lock``, Hive's ``LockComponent``) on
  ``<state_database>.<name>``: HMS 2.3's lock manager takes names only, the table need not
  exist. A replica whose request is ``WAITING`` is a standby; it polls ``check_lock`` (with a
  ``heartbeat``, so its own place in the queue does not time out) every ``check_seconds``.
* **Renewal and loss**: the holder sends ``heartbeat`` every ``heartbeat_seconds``. HMS deletes
  a lock not heard of for ``hive.txn.timeout`` (300 s by default; the deletion is the
  ``AcidHouseKeeperService``'s, every ``hive.timedout.txn.reaper.interval``, 180 s). The holder
  counts its own lease from the moment it *sent* the last heartbeat that succeeded: after
  ``lease_seconds`` (shorter than ``hive.txn.timeout``) without a successful one, or at once when
  HMS answers ``NoSuchLockException``/``TxnAbortedException``, :meth:`PublisherLock.valid` turns
  false and the publisher stops before another replica can have been granted the lock.
* **Takeover**: after a clean stop the holder unlocks (a standby's ``WAITING`` request too: it
  would block every later replica), and a standby takes over within ``check_seconds``. After
  a crash, within ``hive.txn.timeout`` + ``check_seconds`` (300 + 5 s with the defaults): the
  first standby releases the dead holder's request itself once its heartbeat is older than
  ``hive.txn.timeout`` (``timeout_seconds``), and at once when the holder was a gateway process
  of its own host that is gone (:mod:`gateway.upstream.locks`); HMS's own housekeeping, every
  ``hive.timedout.txn.reaper.interval``, does the same for standbys of older gateways.
* **The offset** (the last event id the broker acknowledged) is a parameter of the database
  ``state_database`` (created when missing), key ``hms-gateway.publisher.<topology>/<path>.offset``:
  ``alter_database`` writes no notification in HMS 2.3 (Hive 3+ writes ``ALTER_DATABASE``,
  which the publisher does not publish). Two services' publishers writing at once may set the
  other's offset back (``alter_database`` replaces the whole map): that only adds duplicates.

Needs an HMS with transactions on (``hive.support.concurrency=true``, ``hive.txn.manager=
org.apache.hadoop.hive.ql.lockmgr.DbTxnManager``, ``hive.compactor.initiator.on=true`` on one
metastore, which runs the reaper); without them ``lock`` fails with ``TApplicationException``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time

from gateway.upstream.errors import UpstreamError
from gateway.upstream.locks import HmsLock, LockRefused, Schedule

log = logging.getLogger(__name__)

__all__ = ["LockLost", "OffsetStore", "PublisherLock", "lock_name"]

_NOT_NAME = re.compile(r"[^a-z0-9_]+")
_NO_LOCKS_RETRY_SECONDS = 60.0  # an HMS without lock support needs its configuration changed


class LockLost(Exception):
    """The lock is gone or its lease ran out: stop publishing."""


def lock_name(topology: str, path: str) -> str:
    """The lock's table name for a service: ``publisher_<topology>_<path>`` in HMS's name
    characters (``[a-z0-9_]``), plus 8 hex digits of the exact names so that two services
    never share one."""
    digest = hashlib.sha256(f"{topology}/{path}".encode()).hexdigest()[:8]
    readable = _NOT_NAME.sub("_", f"{topology}_{path}".lower()).strip("_")[:80]
    return f"publisher_{readable}_{digest}"


class PublisherLock:
    """An exclusive HMS lock on ``database.name``, acquired, renewed and released by one task:
    the request's life is :class:`~gateway.upstream.locks.HmsLock`'s (marked, released on every
    exit, dead holders released), the lease is this class's.

    ``client`` is a :class:`~gateway.upstream.metastore.MetastoreClient`. Times are seconds:
    ``heartbeat_seconds`` between heartbeats, ``lease_seconds`` (< HMS's ``hive.txn.timeout``,
    ``timeout_seconds``) the local validity after a heartbeat was sent, ``check_seconds``
    between a standby's checks.
    """

    def __init__(self, client, database: str, name: str, *, heartbeat_seconds: float,
                 lease_seconds: float, check_seconds: float, timeout_seconds: float = 300.0,
                 clock=time.monotonic):
        self.client = client
        self.database, self.name = database, name
        self.heartbeat_seconds, self.lease_seconds, self.check_seconds = heartbeat_seconds, lease_seconds, check_seconds
        user = client.identity.user if client.identity is not None else "hms-gateway"
        self._lock = HmsLock(client, [(database, name)], kind="event-stream", user=user, clock=clock,
                             schedule=Schedule(check_min=check_seconds, check_max=check_seconds, wait=None,
                                               heartbeat=heartbeat_seconds, timeout=timeout_seconds,
                                               recover_every=check_seconds))
        self._clock = clock
        self._valid_until = 0.0

    @property
    def lockid(self) -> int | None:
        return self._lock.lockid

    def valid(self) -> bool:
        """Whether the lock is held and its local lease has not run out."""
        return self.lockid is not None and self._clock() < self._valid_until

    async def acquire(self) -> None:
        """Return once the lock is held (waiting as a standby meanwhile). Failures (HMS
        unreachable, a lock that timed out while waiting) are logged and retried; cancelled,
        the request is released."""
        idl = self.client.idl
        try:
            while True:
                started = self._clock()
                try:
                    if self.lockid is None:
                        state = await self._lock.request()
                    else:
                        state = await self._lock.check()  # HMS heartbeats a waiting request with it
                except (idl.NoSuchLockException, idl.TxnAbortedException, idl.NoSuchTxnException):
                    continue  # our place in the queue timed out: ask again
                except LockRefused as exc:  # HMS without transactions: an operator's fix
                    log.error("publisher lock %s.%s: %s: it needs hive.support.concurrency=true and hive.txn.manager="
                              "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager, or give the broker an offset_file "
                              "(one replica only); retrying in %g s",
                              self.database, self.name, exc, _NO_LOCKS_RETRY_SECONDS)
                    await asyncio.sleep(_NO_LOCKS_RETRY_SECONDS)
                    continue
                except (UpstreamError, idl.MetaException, OSError) as exc:
                    log.warning("publisher lock %s.%s: %s; retrying in %g s", self.database, self.name, exc,
                                self.check_seconds)
                    await asyncio.sleep(self.check_seconds)
                    continue
                if state == idl.LockState.ACQUIRED:
                    self._valid_until = started + self.lease_seconds
                    log.info("publisher lock %s.%s acquired (lock id %d)", self.database, self.name, self.lockid)
                    return
                if state != idl.LockState.WAITING:  # ABORT or NOT_ACQUIRED: start over
                    await self._lock.release()
                await asyncio.sleep(self.check_seconds)
        except BaseException:
            await self.release()  # a standby's WAITING request would block every later replica
            raise

    async def keep(self) -> None:
        """Heartbeat until the lock is lost; raises :class:`LockLost` then (HMS no longer knows
        the lock, or no heartbeat succeeded for ``lease_seconds``)."""
        idl = self.client.idl
        while True:
            await asyncio.sleep(min(self.heartbeat_seconds, max(self._valid_until - self._clock(), 0)))
            if not self.valid():
                raise LockLost(f"no heartbeat succeeded within {self.lease_seconds:g} s")
            sent = self._clock()
            try:
                await self._lock.heartbeat()
            except (idl.NoSuchLockException, idl.TxnAbortedException, idl.NoSuchTxnException) as exc:
                raise LockLost(f"HMS no longer holds the lock: {exc}") from None
            except (UpstreamError, idl.MetaException, OSError) as exc:
                log.warning("publisher lock %s.%s: heartbeat failed: %s", self.database, self.name, exc)
                continue
            self._valid_until = sent + self.lease_seconds

    async def release(self) -> None:
        """Unlock (completed even when cancelled meanwhile; a lock HMS cannot be told about
        times out on its own)."""
        self._valid_until = 0.0
        await self._lock.release()


class OffsetStore:
    """The publisher's offset as a parameter of the database ``database`` in HMS."""

    def __init__(self, client, database: str, key: str):
        self.client, self.database, self.key = client, database, key

    async def _database(self):
        idl = self.client.idl
        try:
            return await self.client.get_database(self.database)
        except idl.NoSuchObjectException:
            pass
        try:
            await self.client.call("create_database", database=idl.Database(
                name=self.database, description="HMS Gateway state (broker publisher offsets)", parameters={}))
        except idl.AlreadyExistsException:
            pass  # another replica created it meanwhile
        return await self.client.get_database(self.database)

    async def read(self) -> int | None:
        """The stored event id, or None when none is stored. Raises ``ValueError`` naming the
        database and key when the value is not a non-negative integer; HMS errors as raised."""
        value = ((await self._database()).parameters or {}).get(self.key)
        if value is None:
            return None
        if not value.isdigit():
            raise ValueError(f"HMS database {self.database} parameter {self.key}: not an event id: {value[:40]!r}")
        return int(value)

    async def write(self, event_id: int) -> None:
        """Store ``event_id``. Raises HMS errors and ``UpstreamError``."""
        database = await self._database()
        database.parameters = {**(database.parameters or {}), self.key: str(event_id)}
        await self.client.call("alter_database", dbname=self.database, db=database)
