"""Iceberg views (the spec's ``listViews``, ``createView``, ``loadView``, ``replaceView``,
``dropView``, ``viewExists``, ``renameView``), stored as Java's ``HiveCatalog`` stores them
(``HiveViewOperations``): an HMS table of ``tableType=VIRTUAL_VIEW`` with
``table_type=ICEBERG-VIEW`` and ``metadata_location`` (:mod:`gateway.iceberg.hive_tables`), the
view metadata in ``<location>/metadata/<version>-<uuid>.gz.metadata.json``
(:mod:`gateway.iceberg.files`).

What a view shares with a table is written once, for both (:mod:`gateway.iceberg.objects`,
:data:`~gateway.iceberg.objects.VIEW`): lookup, exists, drop, rename, the load result, and a
replace, which is the commit of tables (:func:`gateway.iceberg.commit.commit_object`: HMS's
EXCLUSIVE lock, the view re-read under it, the new file written, ``alter_table`` with
``DO_NOT_UPDATE_STATS``, an unknown outcome settled by re-reading) with the updates and
requirements of :mod:`gateway.iceberg.view_updates`. A create is HMS's ``create_table`` (409
when a table or view has the name), as a table create.

Views and tables share HMS's names: a table is never a view here (404 ``NoSuchViewException``
saying it is a table) and a view never a table (:meth:`Catalog.lookup`). Policy, Ranger's
Hive model (a view is a table resource): load ``select``, create ``create`` on the namespace,
replace ``alter``, drop ``drop``, rename ``alter`` on the view and ``create`` on the target
namespace; a view the user cannot see is 404, one the user sees but may not change 403;
listings are filtered.
"""

from __future__ import annotations

from aiohttp import web

from gateway.iceberg import errors
from gateway.iceberg.bodies import CLIENT_FAULTS, RenameTable
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.commit import commit_object, same_object
from gateway.iceberg.files import next_view_metadata_location
from gateway.iceberg.locations import check_properties
from gateway.iceberg.objects import VIEW
from gateway.iceberg.tables import drop, exists, listing, placed, rename, stored
from gateway.iceberg.paths import RouteMatch
from gateway.iceberg.view_updates import CommitViewRequest, CreateViewRequest, new_view


async def list_views(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """``ListTablesResponse`` of the namespace's Iceberg views (paged). Raises ``NoSuchNamespace``,
    ``BadRequest`` (paging)."""
    return await listing(catalog, route.db(), request.query, VIEW)


async def create_view(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: CreateViewRequest) -> Reply:
    """``LoadViewResult`` of a new view. Raises ``BadRequest`` (body, names, an invalid view),
    ``Forbidden``, ``NoSuchNamespace``, ``AlreadyExists`` (a table or view has the name)."""
    db = route.db()
    name, location = await placed(catalog, db, ask, VIEW)
    try:
        metadata = new_view(ask, location)
        check_properties(metadata.location, metadata.properties, f"view {db}.{name}")
        location = next_view_metadata_location(metadata, None)
    except CLIENT_FAULTS as exc:
        raise errors.BadRequest(f"invalid view: {str(exc)[:500]}") from None
    await stored(catalog, db, name, metadata, location, VIEW)
    return Reply(body=VIEW.result(location, metadata))


async def load_view(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """``LoadViewResult``. Raises ``NoSuchView``, ``NoSuchNamespace``, ``Forbidden``."""
    db, name = route.db_table()
    location, metadata = await catalog.metadata(await catalog.lookup(db, name, VIEW), VIEW)
    return Reply(body=VIEW.result(location, metadata))


async def view_exists(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """204, or 404 (no such view, or not visible)."""
    return await exists(catalog, route, VIEW)


async def drop_view(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """204; the metadata files stay (Java's ``HiveCatalog.dropView``). Raises ``NoSuchView``,
    ``Forbidden``."""
    return await drop(catalog, route, VIEW)


async def rename_view(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: RenameTable) -> Reply:
    """204 (``RenameTableRequest``): :func:`gateway.iceberg.tables.rename` of a view."""
    return await rename(catalog, ask, VIEW)


async def replace_view(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: CommitViewRequest) -> Reply:
    """``LoadViewResult`` after a commit (``CommitViewRequest``, :func:`gateway.iceberg.commit.commit_object`).
    Raises ``BadRequest`` (body, unknown or invalid updates: nothing written), ``CommitFailed``
    (a requirement, the lock, HMS refusing), ``NoSuchView``, ``Forbidden``, ``CommitStateUnknown``."""
    db, name = route.db_table()
    same_object(ask, VIEW, db, name)
    return Reply(body=await commit_object(catalog, VIEW, db, name, ask))
