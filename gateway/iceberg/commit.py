"""A table commit (``POST /v1/namespaces/{ns}/tables/{table}``) with the protocol of Iceberg's
``HiveCatalog`` (Java ``HiveTableOperations``/``MetastoreLock``, PyIceberg
``HiveCatalog.commit_table``), so REST commits and direct HiveCatalog writers share a table.
A view's replace (``POST .../views/{view}``) is the same commit, :func:`commit_object`, with the
view's metadata and update applier (:data:`gateway.iceberg.objects.VIEW`, Java's
``HiveViewOperations``):

1. the gateway's own queue for the table (one commit per table per pod asks HMS at a time),
   then ``lock`` EXCLUSIVE on the table; while ``WAITING``, ``check_lock`` with back-off (from
   ``lock_check_min_wait`` doubling to ``lock_check_max_wait``) up to ``lock_wait`` → else 409
   (:class:`gateway.upstream.locks.HmsLock`: marked requests, dead holders released);
2. re-read the table under the lock; its ``metadata_location`` is the base: the requirements
   are checked against that file's metadata (409 ``CommitFailedException`` when one fails),
   the updates applied with PyIceberg's ``update_table_metadata``. They were checked and
   applied once before the lock already (a stale writer's 409 then needs no lock); that work
   is reused when the base has not moved;
3. write ``<location>/metadata/<version>-<uuid>.metadata.json``;
4. ``alter_table_with_environment_context`` with ``metadata_location``,
   ``previous_metadata_location``, ``table_type=ICEBERG``, ``EXTERNAL=TRUE`` and the
   properties, ``DO_NOT_UPDATE_STATS=true`` in the environment context;
5. ``unlock`` in every outcome; ``heartbeat`` every ``lock_heartbeat`` seconds while the lock is held.

A commit with ``assert-create`` on a table that does not exist creates it (a staged create,
``stage-create``): the updates applied to empty metadata, the first metadata file, HMS's
``create_table``.

When the alter's outcome is unknown the table is read again: the new location (or a later
commit whose previous location it is) means committed. A call that was never sent (no
connection could be opened) and a table still at the base mean not committed (503, the new file
deleted). Anything else is ``CommitStateUnknownException`` (504 after a timeout, else 502) and
the new file is kept: a call that was sent may still be applied by HMS after the re-read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertCreate,
    RemovePartitionStatisticsUpdate,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    RemoveStatisticsUpdate,
    SetPartitionStatisticsUpdate,
    SetSnapshotRefUpdate,
    SetStatisticsUpdate,
    update_table_metadata,
)

from aiohttp import web

from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.files import next_metadata_location
from gateway.iceberg.hive_tables import COMMIT_CONTEXT, metadata_location, new_table
from gateway.lakehouse.table_parameters import PREVIOUS_METADATA_LOCATION
from gateway.iceberg.bodies import CLIENT_FAULTS, CommitRequest
from gateway.iceberg.locations import check_identity, check_moved, check_properties, check_references, check_table
from gateway.iceberg.objects import TABLE, CatalogObject
from gateway.iceberg.paths import RouteMatch
from gateway.iceberg.hms_refusals import commit_refusal
from gateway.upstream import table_queue
from gateway.upstream.errors import UpstreamConnectFailed, UpstreamError, UpstreamTimeout
from gateway.upstream.locks import HmsLock, LockNotGranted, LockRefused

log = logging.getLogger(__name__)

#: Updates that change a table's data (Ranger ``update``); every other update changes its
#: definition (``alter``).
DATA_UPDATES = (AddSnapshotUpdate, SetSnapshotRefUpdate, RemoveSnapshotsUpdate, RemoveSnapshotRefUpdate,
                SetStatisticsUpdate, RemoveStatisticsUpdate, SetPartitionStatisticsUpdate,
                RemovePartitionStatisticsUpdate)
_REREADS = 3


def accesses(updates) -> list[str]:
    """The Ranger access types a commit of ``updates`` needs (``update``, ``alter`` or both)."""
    needed = []
    if any(isinstance(u, DATA_UPDATES) for u in updates):
        needed.append("update")
    if any(not isinstance(u, DATA_UPDATES) for u in updates) or not updates:
        needed.append("alter")
    return needed


async def commit_table(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: CommitRequest) -> Reply:
    """``updateTable``: the commit of the route's table (see the module docstring)."""
    db, name = route.db_table()
    same_object(ask, TABLE, db, name)
    if any(isinstance(r, AssertCreate) for r in ask.requirements):
        # A staged create is a create: its access (create on the namespace) was judged first
        # (404/403 alike whether the table exists)
        await catalog.absent(db, name, conflict=errors.CommitFailed)
        return await _create(catalog, db, name, ask)
    # update and/or alter, and as a load (a commit answers the whole metadata): the denied
    # columns, row filter and masks, the storage identity: the route's rules (gateway.iceberg.access)
    return Reply(body=await commit_object(catalog, TABLE, db, name, ask))


def same_object(ask, object_type: CatalogObject, db: str, name: str) -> None:
    """Raises :class:`~errors.BadRequest` when a commit's body names another object than its path."""
    if ask.identifier is not None and (ask.identifier.namespace != [db] or ask.identifier.name != name):
        raise errors.BadRequest(f"the body's identifier is not the {object_type.noun} of the path")


async def commit_object(catalog: Catalog, object_type: CatalogObject, db: str, name: str, ask):
    """The commit of ``ask`` (its ``requirements`` and ``updates``) to the table or view (``object_type``)
    ``db.name``, the policy already checked; its load result (the base's when nothing changes:
    no new file, Java's no-op commit). Checked before the lock too, as Iceberg's own REST
    handlers do: a writer whose base is already stale gets its 409 (or 404, 400) at once
    instead of after its turn at the lock; under the lock (:func:`locked`) re-read and checked
    again unless the base has not moved, the new file written, the HMS table altered
    (:func:`alter_committed`). Raises the object type's 404, :class:`~errors.CommitFailed`,
    :class:`~errors.BadRequest`, :class:`~errors.Forbidden` (a location),
    :class:`~errors.CommitStateUnknown`, :class:`~errors.ServiceUnavailable`."""
    subject = object_type.subject(db, name)

    async def prepared(hive):
        """(base location, base, new metadata or None) of the object as ``hive`` names it, a
        table's storage identity checked on it (the table read again under the lock is too)."""
        if object_type is TABLE:
            await check_identity(catalog, db, name, hive)
        base_location, base = await catalog.metadata(hive, object_type)
        new = object_type.apply(ask, base_location, base, subject)
        if new is not None:
            await check_moved(catalog, db, name, base, new, what=object_type.noun)
        return base_location, base, new

    checked = await prepared(await catalog.judged(db, name, object_type))
    read = time.monotonic()

    async def still_current() -> None:
        # At the gateway's turn the commits ahead have landed: one whose base they moved gets its
        # 409 now, without a turn in HMS's lock queue (issue 33: 8 writers on one table); the
        # table one of them altered after our read, from memory (see table_queue).
        nonlocal checked
        hive = table_queue.altered_since(db, name, read)
        if hive is None:
            hive = await catalog.lookup(db, name, object_type)
        if metadata_location(hive) != checked[0]:
            checked = await prepared(hive)

    async with locked(catalog, db, name, ready=still_current):
        hive = await catalog.lookup(db, name, object_type)
        base_location, base, new = checked if metadata_location(hive) == checked[0] else await prepared(hive)
        if new is None:
            return object_type.result(base_location, base)
        new_location = object_type.next_location(new, base_location)
        await object_type.write(catalog.files, new, new_location)
        table = object_type.committed(catalog.idl, hive, base, base_location, new, new_location,
                               catalog.service.hive2_compatible)
        sent = time.monotonic()
        await alter_committed(catalog, db, name, table, base_location, new_location, object_type.label)
        table_queue.altered(db, name, table, sent)
    return object_type.result(new_location, new)


@asynccontextmanager
async def locked(catalog: Catalog, db: str, name: str, ready=None) -> AsyncIterator[int]:
    """Hold HMS's EXCLUSIVE lock on ``db.name`` (steps 1 and 5 above), for table and view
    commits alike: the gateway's own queue for the table first (:mod:`gateway.upstream.table_queue`),
    then HMS's lock with heartbeat and unlock on every exit (:class:`~gateway.upstream.locks.HmsLock`).
    Yields the lock id. Raises :class:`~errors.CommitFailed` when the lock is not granted within
    ``lock_wait`` (queue included) or HMS refuses it. ``ready``: awaited at the gateway's turn
    when other commits went first, before HMS is asked (what it raises ends the commit
    without an HMS lock)."""
    schedule = catalog.service.lock
    assert schedule.wait is not None  # a commit always has a deadline
    lock = HmsLock(catalog.client, [(db, name)], kind="iceberg-rest", user=catalog.user, schedule=schedule)
    async with AsyncExitStack() as stack:
        started = time.monotonic()
        try:
            async with asyncio.timeout(schedule.wait):
                waited = await stack.enter_async_context(table_queue.queued(db, name))
        except TimeoutError:
            raise errors.CommitFailed(f"timed out after {schedule.wait:.1f} s waiting for the lock on "
                                      f"{db}.{name} (behind this gateway's other commits)") from None
        if waited and ready is not None:
            await ready()
        lock.schedule = replace(schedule, wait=max(schedule.wait - (time.monotonic() - started), 0.0))
        try:
            lockid = await stack.enter_async_context(lock.held())
        except (LockNotGranted, LockRefused) as exc:
            raise errors.CommitFailed(str(exc)) from None
        yield lockid


async def alter_committed(catalog: Catalog, db: str, name: str, table, base_location: str,
                          new_location: str, what: str = "") -> None:
    """Step 4 of a table or view commit under the lock: point ``db.name`` at the written
    ``new_location`` (``table``, the HMS ``Table`` after the commit). An unknown outcome is
    settled by :func:`settle_unknown`; HMS's refusal deletes the file (nothing references it)
    and raises :class:`~errors.CommitFailed`. ``what``: ``"view "`` in messages of views."""
    try:
        await catalog.client.alter_table(db, name, table, COMMIT_CONTEXT)
    except UpstreamError as exc:
        await settle_unknown(catalog, db, name, base_location, new_location, exc)
    except (catalog.idl.InvalidOperationException, catalog.idl.MetaException) as exc:
        await catalog.files.delete(new_location)
        raise commit_refusal(f"{what}{db}.{name}", exc.message) from None


async def _create(catalog: Catalog, db: str, name: str, request) -> Reply:
    """The commit of a staged create (``assert-create``): the updates applied to empty metadata,
    the first metadata file written, the HMS table created (no lock: there is no table to lock;
    a concurrent create loses with 409, as HiveCatalog's)."""
    database = await catalog.database(db)
    try:
        for requirement in request.requirements:
            requirement.validate(None)
        new = update_table_metadata(MetastoreCatalog._empty_table_metadata(), request.updates,
                                    enforce_validation=True)
    except CommitFailedException as exc:
        raise errors.CommitFailed(str(exc)[:1000]) from None
    except CLIENT_FAULTS as exc:
        raise errors.BadRequest(f"invalid update: {str(exc)[:500]}") from None
    if not new.location:
        raise errors.BadRequest("a staged create must set the table's location (set-location)")
    await check_table(catalog, db, name, new.location, database)
    check_properties(new.location, new.properties, f"table {db}.{name}")
    check_references(None, new)
    location = next_metadata_location(new, None)
    await catalog.files.write(new, location)
    table = new_table(catalog.idl, db, name, catalog.user, new, location, catalog.service.hive2_compatible)
    await catalog.create(db, name, table, location, conflict=errors.CommitFailed,
                         unknown=lambda exc: settle_unknown(catalog, db, name, None, location, exc))
    return Reply(body=TABLE.result(location, new))


async def alter_landed(catalog: Catalog, db: str, name: str, base_location: str | None, new_location: str) -> bool | None:
    """Whether the alter (or create) of ``db.name`` to ``new_location``, whose answer was lost,
    is in HMS: True when the table names ``new_location`` (or names it as its previous one: a
    later commit went on top), False when it is still at ``base_location`` (None: no table),
    None when that cannot be told (HMS unreachable for every re-read, a third location, the
    table gone). For table, view and transaction commits alike."""
    for attempt in range(_REREADS):
        try:
            table = await catalog.client.get_table(db, name)
        except UpstreamError:
            await asyncio.sleep(0.2 * (attempt + 1))
            continue
        except catalog.idl.NoSuchObjectException:
            table = None
        current = None if table is None else metadata_location(table)
        if table is not None and new_location in (current, (table.parameters or {}).get(PREVIOUS_METADATA_LOCATION)):
            return True
        return False if current == base_location else None
    return None


async def settle_unknown(catalog: Catalog, db: str, name: str, base_location: str | None,
                         new_location: str, cause: UpstreamError) -> None:
    """After an alter (or create) of ``db.name`` whose outcome ``cause`` hid: return when it
    landed; raise 503 when it surely did not, else CommitStateUnknown (tables and views alike)."""
    state = await alter_landed(catalog, db, name, base_location, new_location)
    if state:
        return
    if state is False and isinstance(cause, UpstreamConnectFailed):
        # never sent: nothing can land later, so the file is surely unreferenced
        await catalog.files.delete(new_location)
        raise errors.ServiceUnavailable(f"the commit of {db}.{name} did not reach the Hive Metastore: "
                                        f"{cause}") from None
    # Sent and not (yet) visible: HMS may still apply it, or a third location hides whether ours
    # landed before it. Either way the state is unknown and the file stays.
    status = 504 if isinstance(cause, UpstreamTimeout) else 502
    raise errors.CommitStateUnknown(f"the commit of {db}.{name} may or may not have landed "
                                    f"(new metadata file {new_location} kept): {cause}", status)
