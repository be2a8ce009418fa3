"""Tables are HMS tables with ``table_type=ICEBERG`` and ``metadata_location`` (Iceberg's
HiveCatalog layout, :mod:`gateway.iceberg.hive_tables`): list, create (also ``stage-create``:
the metadata is answered, nothing is stored), load, exists, drop, rename. Commits, and the
commit with ``assert-create`` that creates a staged table, are :mod:`gateway.iceberg.commit`. A Hive table that is not Iceberg is not
listed, and naming it is 404 saying so.

Listing, exists, drop and rename are written once for tables and views (:func:`listing`,
:func:`exists`, :func:`drop`, :func:`rename`, given the object type: :mod:`gateway.iceberg.objects`).
"""

from __future__ import annotations

import hashlib
import logging

from aiohttp import hdrs, web

from pyiceberg.catalog.hive import DEFAULT_PROPERTIES
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

from gateway.iceberg import errors, trusted
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.delegation import delegated
from gateway.iceberg.files import next_metadata_location
from gateway.iceberg.locations import check_properties, check_purge, check_table, default_location
from gateway.iceberg.namespaces import paged
from gateway.iceberg.bodies import CLIENT_FAULTS, CreateTableRequest, RenameTable
from gateway.iceberg.objects import TABLE, CatalogObject
from gateway.iceberg.paths import RouteMatch, hms_name, namespace_name
from gateway.iceberg.empty_dirs import remove_empty

log = logging.getLogger(__name__)
SNAPSHOT_MODES = ("all", "refs")


def etag(location: str, snapshots: str, restrictions: str = "") -> str:
    """A strong ``ETag`` of a load result: it changes with the metadata file (a commit always
    writes a new one), the ``snapshots`` mode and what restricts the caller's reads
    (:func:`gateway.iceberg.trusted.fingerprint`: a change of policy changes the answer's
    ``read-restrictions``)."""
    text = f"{location}\n{snapshots}" + (f"\n{restrictions}" if restrictions else "")
    return '"' + hashlib.sha256(text.encode()).hexdigest()[:40] + '"'


def _not_modified(if_none_match: str | None, tag: str) -> bool:
    if not if_none_match:
        return False
    candidates = [c.strip().removeprefix("W/") for c in if_none_match.split(",")]
    return "*" in candidates or tag in candidates


async def list_tables(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    return await listing(catalog, route.db(), request.query, TABLE)


async def listing(catalog: Catalog, db: str, query, object_type: CatalogObject) -> Reply:
    """The spec's ``ListTablesResponse`` (``ListViewsResponse``) of ``db``'s Iceberg tables (or
    views, ``object_type``), paged. Names the user may not see are dropped before their objects are
    read. Raises ``NoSuchNamespace``, ``Forbidden``, ``BadRequest`` (paging)."""
    operation = object_type.list_operation
    paged([], operation, [db], query)  # a bad pageSize or pageToken is refused before HMS is asked
    await catalog.database(db)
    names = catalog.view.visible_tables(db, await catalog.client.call("get_all_tables", db_name=db))
    tables = await catalog.client.call("get_table_objects_by_name", dbname=db, tbl_names=names) if names else []
    kept = {t.tableName for t in tables if object_type.matches(t)}
    chosen, token = paged([n for n in names if n in kept], operation, [db], query)
    # The spec's PageToken is nullable: null says this is the last page (or the whole listing).
    return Reply(body=object_type.list_model(**{"identifiers": [{"namespace": [db], "name": n} for n in chosen],
                                         "next-page-token": token}))


async def create_table(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: CreateTableRequest) -> Reply:
    """Create ``db.<name>``, with storage access as the request's delegation header asks."""
    db = route.db()
    name, location = await placed(catalog, db, ask, TABLE)
    try:
        metadata = new_table_metadata(
            schema=ask.table_schema,
            partition_spec=ask.partition_spec or UNPARTITIONED_PARTITION_SPEC,
            sort_order=ask.write_order or UNSORTED_SORT_ORDER,
            location=location, properties={**DEFAULT_PROPERTIES, **ask.properties},
        )
    except CLIENT_FAULTS as exc:
        raise errors.BadRequest(f"invalid table definition: {str(exc)[:500]}") from None
    check_properties(metadata.location, metadata.properties, f"table {db}.{name}")
    if ask.stage_create:  # nothing stored: the commit with assert-create creates it
        return Reply(body=TABLE.result(None, metadata))
    metadata_location = next_metadata_location(metadata, None)
    await stored(catalog, db, name, metadata, metadata_location, TABLE)
    config, credentials = await delegated(catalog, request, db, name, location)
    return Reply(body=TABLE.result(metadata_location, metadata, config, credentials))


async def placed(catalog: Catalog, db: str, ask, object_type: CatalogObject) -> tuple[str, str]:
    """``(name, location)`` of a new table or view (``object_type``) that ``ask`` (its ``name``,
    ``location``, ``properties``) asks for in ``db``, checked (the name, its properties and ``create`` on the namespace were, by the
    route's declared access: :mod:`gateway.iceberg.access`): the name free of tables and views, the location
    (the namespace's default, or the one asked for) where the policy and the deputy rules let
    it lie (:func:`~gateway.iceberg.locations.check_table`). Raises ``BadRequest``,
    ``Forbidden``, ``NoSuchNamespace``, ``AlreadyExists``."""
    name = hms_name(ask.name, object_type.noun)
    database = await catalog.database(db)
    await catalog.absent(db, name)
    location = default_location(database, name) if ask.location is None else ask.location.rstrip("/")
    await check_table(catalog, db, name, location, database, what=object_type.noun)
    return name, location


async def stored(catalog: Catalog, db: str, name: str, metadata, location: str, object_type: CatalogObject,
                 *, written: bool = False) -> None:
    """Write the first metadata file ``location`` of a new table or view (``object_type``; unless
    ``written``: a registered file, not the gateway's, never written nor deleted) and create its
    HMS table (:meth:`~gateway.iceberg.catalog.Catalog.create`, which raises)."""
    if not written:
        await object_type.write(catalog.files, metadata, location)
    table = object_type.created(catalog.idl, db, name, catalog.user, metadata, location, catalog.service.hive2_compatible)
    await catalog.create(db, name, table, None if written else location, what=object_type.noun.capitalize())


async def load_table(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """Load ``db.name``, with storage access as the request's delegation header asks; 304 for
    an ``If-None-Match`` that names the answer's ``ETag``."""
    db, name = route.db_table()
    if_none_match = request.headers.get(hdrs.IF_NONE_MATCH)
    snapshots = request.query.get("snapshots", "all")
    if snapshots not in SNAPSHOT_MODES:
        raise errors.BadRequest(f"snapshots must be all or refs, got {snapshots[:40]!r}")
    # select, and the denied columns, row filter and masks found a trusted engine (or none
    # apply): the route's rules (gateway.iceberg.access), which also state them in the answer
    hive = await catalog.judged(db, name)
    location = hive.parameters["metadata_location"]
    tag = etag(location, snapshots, trusted.fingerprint(catalog, db, name, hive))
    if _not_modified(if_none_match, tag):
        return Reply(status=304, headers=(("ETag", tag),))
    location, metadata = await catalog.metadata(hive)
    if snapshots == "refs":
        referenced = {ref.snapshot_id for ref in metadata.refs.values()}
        metadata = metadata.model_copy(update={"snapshots": [s for s in metadata.snapshots
                                                              if s.snapshot_id in referenced]})
    config, credentials = await delegated(catalog, request, db, name, metadata.location)
    return Reply(body=TABLE.result(location, metadata, config, credentials), headers=(("ETag", tag),))


async def table_exists(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    return await exists(catalog, route, TABLE)


async def exists(catalog: Catalog, route: RouteMatch, object_type: CatalogObject) -> Reply:
    """204 when the route's table (or view, ``object_type``) exists and the user sees it, else the
    object type's 404."""
    db, name = route.db_table()
    await catalog.lookup(db, name, object_type)
    return Reply(status=204)


async def drop_table(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    purge = request.query.get("purgeRequested", "false").lower()
    if purge not in ("true", "false"):
        raise errors.BadRequest("purgeRequested must be true or false")
    return await drop(catalog, route, TABLE, purge=purge == "true")


async def drop(catalog: Catalog, route: RouteMatch, object_type: CatalogObject, purge: bool = False) -> Reply:
    """204 when the route's table (or view, ``object_type``) is dropped from HMS (policy: ``drop``);
    with ``purge`` (tables only) its files are deleted after, when it lies where the gateway
    may delete (:func:`~gateway.iceberg.locations.check_purge`, else 403 before anything is
    dropped); without, they stay (as Java's ``HiveCatalog.dropView`` leaves a view's). Raises
    the object type's 404, ``Forbidden``."""
    db, name = route.db_table()
    hive = await catalog.lookup(db, name, object_type)
    location, metadata = await catalog.metadata(hive, object_type) if purge else (None, None)
    if metadata is not None:
        await check_purge(catalog, db, name, metadata)
    await catalog.drop(db, name, object_type)
    if metadata is not None and location is not None:
        try:
            await catalog.files.purge(metadata, location, f"{db}.{name}")
        except Exception:  # the table is gone from HMS; leftover files are not the client's error
            log.warning("purge of dropped table %s.%s left files behind", db, name, exc_info=True)
        else:
            await remove_empty(metadata.location, below=True)
    return Reply(status=204)


async def rename_table(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: RenameTable) -> Reply:
    return await rename(catalog, ask, TABLE)


async def rename(catalog: Catalog, ask: RenameTable, object_type: CatalogObject) -> Reply:
    """204 when the table (or view, ``object_type``) ``ask.source`` is renamed to ``ask.destination``
    (also across namespaces; policy: ``alter`` on it, ``create`` on the target namespace).
    Raises the object type's 404, ``NoSuchNamespace`` (the target's), ``AlreadyExists`` (a table or
    view has the new name), ``Forbidden``, ``BadRequest`` (names)."""
    src_db, src = namespace_name(ask.source.namespace), hms_name(ask.source.name, object_type.noun)
    dst_db, dst = namespace_name(ask.destination.namespace), hms_name(ask.destination.name, object_type.noun)
    catalog.named(src_db, src)
    await catalog.rename(await catalog.lookup(src_db, src, object_type), dst_db, dst, object_type)
    return Reply(status=204)
