"""``POST /v1/transactions/commit`` (operationId ``commitTransaction``): one commit over several
tables (the spec's ``CommitTransactionRequest``: ``table-changes``, each a
``CommitTableRequest`` with its ``identifier``), answered 204.

HMS has no multi-table transaction, so this is what the gateway promises (docs/iceberg.md):

1. every table's lock (HiveCatalog's EXCLUSIVE table lock, :mod:`gateway.iceberg.commit`) is taken
   in one fixed order (namespace, then table name), so two transactions cannot deadlock; a lock
   not granted within ``lock_wait`` releases the others: 409;
2. under all the locks every table is re-read and every requirement checked: one conflict is
   409 and nothing is written anywhere (all or nothing for conflicts);
3. every new metadata file is written (a failed write deletes the others: nothing in HMS changed);
4. the tables are altered one by one. If HMS refuses an alter, or its outcome is unknown and a
   re-read shows it did not land, the tables already altered are put back by compensating alters
   (their HMS table as read under the lock), still under the same locks, so no writer that takes
   the lock (HiveCatalog's, this gateway's) built on the partial state; readers take no lock and
   may have loaded a table in between (HMS isolates no reads). The new files are deleted, and the
   answer is 409 (HMS refused), 400 (HMS's column-type refusal, which a retry meets again:
   :mod:`gateway.iceberg.hms_refusals`) or 503 (HMS unreachable).
5. If a compensating alter fails too, or an alter's outcome stays unknown, the answer is
   ``CommitStateUnknownException`` (502, 504 after a timeout) naming the tables whose change
   landed, and every new file is kept.

Access needed per table as for a single commit (``update`` and/or ``alter``). A staged create
(``assert-create``) is not offered in a transaction (406).
"""

from __future__ import annotations

import copy
import json
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict
from pyiceberg.table.update import AssertCreate

from gateway.iceberg import errors
from gateway.iceberg.bodies import commit_request, document
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.commit import alter_landed, locked
from gateway.iceberg.objects import apply_updates
from gateway.iceberg.files import next_metadata_location
from gateway.iceberg.hive_tables import COMMIT_CONTEXT, committed_table
from gateway.iceberg.hms_refusals import column_refusal
from gateway.iceberg.locations import check_identity, check_moved
from gateway.iceberg.paths import RouteMatch, hms_name, namespace_name
from gateway.upstream.errors import UpstreamError, UpstreamTimeout

log = logging.getLogger(__name__)

#: Most tables one transaction may change (each holds an HMS lock for its duration).
MAX_TABLES = 100


@dataclass
class Change:
    """One table's part: its request, then (under the lock) the HMS table as read, the base and
    new metadata and where the new file goes."""

    db: str
    name: str
    request: Any
    hive: Any = None
    base_location: str | None = None
    base: Any = None
    new: Any = None
    new_location: str | None = None

    @property
    def key(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.base


def changes_of(body: bytes) -> list[Change]:
    """The body's table changes, in lock order. Raises :class:`~errors.BadRequest` (shape, a
    change without identifier, a table named twice, over :data:`MAX_TABLES`),
    :class:`~errors.Unsupported` (``assert-create``)."""
    raw = document(body)
    items = raw.get("table-changes")
    if not isinstance(items, list) or not items:
        raise errors.BadRequest("invalid CommitTransactionRequest: table-changes must be a non-empty list")
    if len(items) > MAX_TABLES:
        raise errors.BadRequest(f"a transaction may change at most {MAX_TABLES} tables, got {len(items)}")
    changes: dict[tuple[str, str], Change] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("identifier"), dict):
            raise errors.BadRequest(f"invalid CommitTransactionRequest: table-changes.{i}.identifier is required")
        request = commit_request(json.dumps(item).encode())
        db = namespace_name(request.identifier.namespace)
        name = hms_name(request.identifier.name, "table")
        if (db, name) in changes:
            raise errors.BadRequest(f"table {db}.{name} is named twice in one transaction")
        if any(isinstance(r, AssertCreate) for r in request.requirements):
            raise errors.Unsupported("assert-create (a staged create) is not offered in a transaction")
        changes[(db, name)] = Change(db, name, request)
    return [changes[key] for key in sorted(changes)]


class CommitTransactionRequest(BaseModel):
    """The spec's ``CommitTransactionRequest``, read (:meth:`from_request`): its table changes
    in lock order."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    changes: tuple[Change, ...]

    @classmethod
    def from_request(cls, catalog: Catalog, request: web.BaseRequest, body: bytes) -> CommitTransactionRequest:
        """Raises as :func:`changes_of`."""
        return cls(changes=tuple(changes_of(body)))


async def commit_transaction(catalog: Catalog, route: RouteMatch, request: web.BaseRequest,
                             ask: CommitTransactionRequest) -> Reply:
    """204 when every change landed. Raises ``BadRequest``, ``Forbidden``, ``NoSuchTable``,
    ``CommitFailed`` (409: a conflict, a lock not granted, HMS refused and all was rolled back),
    ``ServiceUnavailable`` (503, rolled back), ``CommitStateUnknown``."""
    changes = list(ask.changes)  # each judged as a table commit before (gateway.iceberg.access)
    async with AsyncExitStack() as locks:
        for change in changes:  # one fixed order: no deadlock between two transactions
            await locks.enter_async_context(locked(catalog, change.db, change.name))
        await _prepare(catalog, changes)
        written = [c for c in changes if c.changed]
        await _write(catalog, written)
        await _alter_all(catalog, written)
    return Reply(status=204)


async def _prepare(catalog: Catalog, changes: list[Change]) -> None:
    """Re-read every table under the locks; check every requirement; apply the updates."""
    for change in changes:
        change.hive = await catalog.lookup(change.db, change.name)
        await check_identity(catalog, change.db, change.name, change.hive)
        change.base_location, change.base = await catalog.metadata(change.hive)
    for change in changes:
        change.new = apply_updates(change.request, change.base_location, change.base, change.key)
        await check_moved(catalog, change.db, change.name, change.base, change.new)
        if change.changed:
            change.new_location = next_metadata_location(change.new, change.base_location)


async def _write(catalog: Catalog, changes: list[Change]) -> None:
    done: list[Change] = []
    try:
        for change in changes:
            await catalog.files.write(change.new, change.new_location)
            done.append(change)
    except BaseException:
        await _delete_files(catalog, done)
        raise


async def _delete_files(catalog: Catalog, changes: list[Change]) -> None:
    for change in changes:
        try:
            await catalog.files.delete(change.new_location)
        except OSError:
            log.warning("could not delete unreferenced metadata file %s", change.new_location)


def _committed(catalog: Catalog, change: Change) -> Any:
    """The HMS table of ``change`` after it (built on a copy: ``change.hive`` is the rollback)."""
    table = copy.copy(change.hive)
    table.parameters = dict(change.hive.parameters or {})
    return committed_table(catalog.idl, table, change.base, change.base_location, change.new,
                           change.new_location, catalog.service.hive2_compatible)


async def _alter_all(catalog: Catalog, changes: list[Change]) -> None:
    idl = catalog.idl
    landed: list[Change] = []
    for change in changes:
        try:
            await catalog.client.alter_table(change.db, change.name, _committed(catalog, change), COMMIT_CONTEXT)
        except (UpstreamError, idl.InvalidOperationException, idl.MetaException) as exc:
            state = (await alter_landed(catalog, change.db, change.name, change.base_location, change.new_location)
                     if isinstance(exc, UpstreamError) else False)
            if state is True:
                landed.append(change)
                continue
            if state is None:
                raise _unknown(changes, landed + [change], exc) from None
            await _roll_back(catalog, changes, landed, change, exc)
        else:
            landed.append(change)


async def _roll_back(catalog: Catalog, changes: list[Change], landed: list[Change], failed: Change,
                     cause: Exception) -> None:
    """Put the ``landed`` tables back to their state read under the locks, delete every new file
    and raise 409/503; or raise CommitStateUnknown when a compensating alter fails."""
    remaining = list(landed)
    for change in reversed(landed):
        try:
            await catalog.client.alter_table(change.db, change.name, change.hive, COMMIT_CONTEXT)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the state unknown
            log.warning("compensating alter of %s failed: %r", change.key, exc)
            raise _unknown(changes, remaining, cause) from None
        remaining.remove(change)
    await _delete_files(catalog, changes)
    rolled = ", ".join(c.key for c in landed) or "none"
    if isinstance(cause, UpstreamError):
        log.warning("the transaction failed at %s: %s", failed.key, cause)
        raise errors.ServiceUnavailable(f"the transaction failed at {failed.key} (the Hive Metastore is "
                                        f"unavailable); tables put back: {rolled}")
    column = column_refusal(failed.key, getattr(cause, "message", None))  # retrying cannot help: 400
    refused = column or errors.hms_refused(cause, f"the commit of {failed.key}")
    error = errors.BadRequest if column else errors.CommitFailed
    raise error(f"{refused}; the transaction was rolled back (tables put back: {rolled})")


def _unknown(changes: list[Change], landed: list[Change], cause: Exception) -> errors.CommitStateUnknown:
    keys = ", ".join(c.key for c in landed) or "none"
    status = 504 if isinstance(cause, UpstreamTimeout) else 502
    return errors.CommitStateUnknown(
        f"the transaction over {', '.join(c.key for c in changes)} is partly applied or unknown: "
        f"changes that landed or may have landed: {keys}; new metadata files kept ({cause})", status)
