"""Iceberg views (the spec's ``listViews``, ``createView``, ``loadView``, ``replaceView``,
``dropView``, ``viewExists``, ``renameView``), stored as Java's ``HiveCatalog`` stores them
(``HiveViewOperations``): an HMS table of ``tableType=VIRTUAL_VIEW`` with
``table_type=ICEBERG-VIEW`` and ``metadata_location`` (:mod:`gateway.iceberg.hive_tables`), the
view metadata in ``<location>/metadata/<version>-<uuid>.gz.metadata.json``
(:mod:`gateway.iceberg.files`).

A replace is a commit under the protocol of table commits (:func:`gateway.iceberg.commit.locked`:
HMS's EXCLUSIVE lock, the view re-read under it, the new file written, ``alter_table`` with
``DO_NOT_UPDATE_STATS``, an unknown outcome settled by re-reading); its updates and requirements
are :mod:`gateway.iceberg.view_updates`. A create is HMS's ``create_table`` (409 when a table
or view has the name), as a table create.

Views and tables share HMS's names: a table is never a view here (404 ``NoSuchViewException``
saying it is a table) and a view never a table (:meth:`Catalog.hive_table`). Policy, Ranger's
Hive model (a view is a table resource): load ``select``, create ``create`` on the namespace,
replace ``alter``, drop ``drop``, rename ``alter`` on the view and ``create`` on the target
namespace; a view the user cannot see is 404, one the user sees but may not change 403;
listings are filtered.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from gateway.iceberg import errors
from gateway.iceberg.bodies import CLIENT_FAULTS, RenameTable, parse
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.commit import alter_committed, locked
from gateway.iceberg.files import next_view_metadata_location
from gateway.iceberg.implementations import refuse_code
from gateway.iceberg.locations import check_moved, check_properties, check_table, default_location
from gateway.iceberg.hive_tables import (
    committed_view_table,
    is_iceberg,
    is_iceberg_view,
    metadata_location,
    new_view_table,
)
from gateway.iceberg.tables import listing
from gateway.iceberg.paths import Route, hms_name, namespace_name
from gateway.iceberg.view_updates import (
    CommitViewRequest,
    CreateViewRequest,
    RequirementFailed,
    apply,
    new_view,
)


def load_result(location: str, metadata) -> bytes:
    """The spec's ``LoadViewResult`` as JSON bytes: ``metadata-location``, ``metadata`` (as the
    file holds it), ``config`` (empty)."""
    return (b'{"metadata-location":' + json.dumps(location).encode() + b',"metadata":'
            + metadata.model_dump_json().encode() + b',"config":{}}')


def _parse(model: type[BaseModel], body: bytes) -> Any:
    try:
        return parse(model, body)
    except CLIENT_FAULTS as exc:  # PyIceberg's own validators
        raise errors.BadRequest(f"invalid {model.__name__}: {str(exc)[:500]}") from None


def _names(route: Route) -> tuple[str, str]:
    assert route.namespace is not None and route.table is not None  # the template has both
    return route.namespace, route.table


def _require(catalog: Catalog, access: str, db: str, name: str) -> None:
    """404 ``NoSuchViewException`` when the user cannot see the view, else as
    :meth:`Catalog.require`."""
    if not catalog.view.visible(db, name):
        raise errors.NoSuchView(f"View does not exist: {db}.{name}")
    catalog.require(access, db, name)


async def hive_view(catalog: Catalog, db: str, name: str):
    """The HMS ``Table`` of an Iceberg view. Raises :class:`~errors.NoSuchView` (also for an
    Iceberg table or another HMS table, saying which), :class:`~errors.NoSuchNamespace`."""
    try:
        found = await catalog.client.get_table(db, name)
    except catalog.idl.NoSuchObjectException:
        await catalog.database(db)  # 404 for the namespace when that is what is missing
        raise errors.NoSuchView(f"View does not exist: {db}.{name}") from None
    if is_iceberg_view(found) and metadata_location(found) is not None:
        return found
    if is_iceberg(found):
        raise errors.NoSuchView(f"{db}.{name} is an Iceberg table, not a view")
    raise errors.NoSuchView(f"{db}.{name} is not an Iceberg view (tableType {found.tableType!r}, "
                            f"table_type {(found.parameters or {}).get('table_type')!r})")


async def list_views(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """``ListTablesResponse`` of the namespace's Iceberg views (paged). Raises ``NoSuchNamespace``,
    ``BadRequest`` (paging)."""
    db = route.namespace
    assert db is not None
    return await listing(catalog, db, request.query, is_iceberg_view, "listViews")


async def create_view(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """``LoadViewResult`` of a new view. Raises ``BadRequest`` (body, names, an invalid view),
    ``Forbidden``, ``NoSuchNamespace``, ``AlreadyExists`` (a table or view has the name)."""
    ask = _parse(CreateViewRequest, body)
    db = route.namespace
    assert db is not None
    name = hms_name(ask.name, "view")
    catalog.named(db, name)
    refuse_code(ask.properties, f"view {db}.{name}")
    catalog.require("create", db)
    database = await catalog.database(db)
    await catalog.absent(db, name)
    location = default_location(database, name) if ask.location is None else ask.location.rstrip("/")
    await check_table(catalog, db, name, location, database, what="view")
    try:
        metadata = new_view(ask, location)
        check_properties(metadata.location, metadata.properties, f"view {db}.{name}")
        location = next_view_metadata_location(metadata, None)
    except CLIENT_FAULTS as exc:
        raise errors.BadRequest(f"invalid view: {str(exc)[:500]}") from None
    await catalog.files.write_view(metadata, location)
    table = new_view_table(catalog.idl, db, name, catalog.user, metadata, location, catalog.service.hive2_compatible)
    await catalog.create(db, name, table, location, what="View")
    return Reply(body=load_result(location, metadata))


async def load_view(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """``LoadViewResult``. Raises ``NoSuchView``, ``NoSuchNamespace``, ``Forbidden``."""
    db, name = _names(route)
    _require(catalog, "select", db, name)
    location, metadata = await catalog.metadata(await hive_view(catalog, db, name), view=True)
    return Reply(body=load_result(location, metadata))


async def view_exists(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """204, or 404 (no such view, or not visible)."""
    db, name = _names(route)
    _require(catalog, "", db, name)
    await hive_view(catalog, db, name)
    return Reply(status=204)


async def drop_view(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """204; the metadata files stay (Java's ``HiveCatalog.dropView``). Raises ``NoSuchView``,
    ``Forbidden``."""
    db, name = _names(route)
    _require(catalog, "drop", db, name)
    await hive_view(catalog, db, name)
    try:
        await catalog.client.call("drop_table", dbname=db, name=name, deleteData=False)
    except catalog.idl.NoSuchObjectException:
        raise errors.NoSuchView(f"View does not exist: {db}.{name}") from None
    return Reply(status=204)


async def rename_view(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """204 (``RenameTableRequest``; also across namespaces). Raises ``NoSuchView``,
    ``NoSuchNamespace`` (the target's), ``AlreadyExists`` (a table or view has the new name),
    ``Forbidden``, ``BadRequest``."""
    ask = _parse(RenameTable, body)
    src_db, src = namespace_name(ask.source.namespace), hms_name(ask.source.name, "view")
    dst_db, dst = namespace_name(ask.destination.namespace), hms_name(ask.destination.name, "view")
    catalog.named(src_db, src)
    _require(catalog, "alter", src_db, src)
    catalog.require("create", dst_db)
    await catalog.rename(await hive_view(catalog, src_db, src), dst_db, dst, "view ")
    return Reply(status=204)


async def replace_view(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """``LoadViewResult`` after a commit (``CommitViewRequest``). Raises ``BadRequest`` (body,
    unknown or invalid updates: nothing written), ``CommitFailed`` (a requirement, the lock, HMS
    refusing), ``NoSuchView``, ``Forbidden``, ``CommitStateUnknown``."""
    db, name = _names(route)
    ask = _parse(CommitViewRequest, body)
    if ask.identifier is not None and (ask.identifier.namespace != [db] or ask.identifier.name != name):
        raise errors.BadRequest("the body's identifier is not the view of the path")
    _require(catalog, "alter", db, name)
    await hive_view(catalog, db, name)  # 404 before taking a lock
    async with locked(catalog, db, name):
        hive = await hive_view(catalog, db, name)
        base_location, base = await catalog.metadata(hive, view=True)
        try:
            new = apply(base, ask.requirements, ask.updates)
            if new is None:  # nothing changes: no new file (Java's no-op commit)
                return Reply(body=load_result(base_location, base))
            check_properties(new.location, new.properties, f"view {db}.{name}")
            await check_moved(catalog, db, name, base, new, what="view")
            new_location = next_view_metadata_location(new, base_location)
        except RequirementFailed as exc:
            raise errors.CommitFailed(str(exc)[:1000]) from None
        except CLIENT_FAULTS as exc:
            raise errors.BadRequest(f"invalid view update: {str(exc)[:500]}") from None
        await catalog.files.write_view(new, new_location)
        table = committed_view_table(catalog.idl, hive, base, base_location, new, new_location,
                                     catalog.service.hive2_compatible)
        await alter_committed(catalog, db, name, table, base_location, new_location, "view ")
    return Reply(body=load_result(new_location, new))
