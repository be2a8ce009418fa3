"""Namespaces are HMS databases (one level): list, create, load, exists, drop, properties.

Properties map as PyIceberg's ``HiveCatalog`` maps them (``_annotate_namespace``,
``load_namespace_properties``): ``comment`` is the database's description, ``location`` its
``locationUri``, every other key a database parameter.
"""

from __future__ import annotations

import copy

from aiohttp import web
from pyiceberg.catalog.rest import NamespaceResponse, UpdateNamespacePropertiesResponse

from gateway.paging import InvalidPageToken, page
from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.locations import check_namespace, stored
from gateway.iceberg.empty_dirs import remove_empty
from gateway.iceberg.bodies import CreateNamespace, ListNamespaces, UpdateNamespaceProperties, page_params
from gateway.iceberg.paths import NAMESPACE_SEPARATOR, RouteMatch, namespace_name

COMMENT, LOCATION = "comment", "location"


def paged(names: list[str], operation: str, scope: list, query) -> tuple[list[str], str | None]:
    """``names`` as the page the query asks for (``pageToken``/``pageSize``; neither: all) and
    the next page's token. Raises :class:`~errors.BadRequest` for a bad size or token."""
    token, size = page_params(query)
    if token is None and size is None:
        return sorted(names), None
    try:
        return page(names, lambda n: n, operation=operation, scope=scope, token=token or None,
                    limit=size or 100)
    except InvalidPageToken:
        raise errors.BadRequest("invalid pageToken") from None


def properties_of(database) -> dict[str, str]:
    """A namespace's properties from its HMS ``Database``."""
    properties = dict(database.parameters or {})
    if database.locationUri:
        properties[LOCATION] = database.locationUri
    if database.description:
        properties[COMMENT] = database.description
    return properties


async def list_namespaces(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    query = request.query
    parent = query.get("parent")
    paged([], "listNamespaces", [parent or ""], query)  # a bad page is refused before HMS is asked
    if parent is not None:  # HMS has no nested namespaces: a parent has no children
        db = namespace_name(parent.split(NAMESPACE_SEPARATOR), errors.NoSuchNamespace)
        await catalog.database(db)
        names: list[str] = []
    else:
        names = catalog.visible_databases(await catalog.client.get_all_databases())
    chosen, token = paged(names, "listNamespaces", [parent or ""], query)
    # The spec's PageToken is nullable: null says this is the last page (or the whole listing).
    return Reply(body=ListNamespaces(**{"namespaces": [[n] for n in chosen], "next-page-token": token}))


async def create_namespace(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: CreateNamespace) -> Reply:
    db = namespace_name(ask.namespace)
    # allowed, not over another namespace, url permission (HMS's own choice: overlaps only)
    await check_namespace(catalog, db, ask.properties.get(LOCATION))
    properties = dict(ask.properties)
    idl = catalog.idl
    database = idl.Database(
        name=db, description=properties.pop(COMMENT, None), locationUri=properties.pop(LOCATION, None),
        parameters=properties, ownerName=catalog.user, ownerType=idl.PrincipalType.USER,
    )
    try:
        await catalog.client.call("create_database", database=database)
    except idl.AlreadyExistsException:
        raise errors.AlreadyExists(f"Namespace already exists: {db}") from None
    except (idl.InvalidObjectException, idl.MetaException) as exc:
        raise errors.BadRequest(errors.hms_refused(exc, f"namespace {db}")) from None
    return Reply(body=NamespaceResponse(namespace=[db], properties=properties_of(await catalog.database(db))))


async def load_namespace(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    db = route.db()
    return Reply(body=NamespaceResponse(namespace=[db], properties=properties_of(await catalog.database(db))))


async def namespace_exists(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    db = route.db()
    await catalog.database(db)
    return Reply(status=204)


async def drop_namespace(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """Drop an empty namespace; its directory goes too when it is local and empty. The database
    is read first: a drop of a missing one is 404 whatever the HMS answers to it (an HMS 2.3
    listener that fails on the missing database would otherwise turn it into a 502)."""
    db = route.db()
    database = await catalog.database(db)
    idl = catalog.idl
    try:
        await catalog.client.call("drop_database", name=db, deleteData=False, cascade=False)
    except idl.NoSuchObjectException:
        raise errors.NoSuchNamespace(f"Namespace does not exist: {db}") from None
    except idl.InvalidOperationException:
        raise errors.NamespaceNotEmpty(f"Namespace {db} is not empty") from None
    await remove_empty(database.locationUri, below=False)
    return Reply(status=204)


async def update_properties(catalog: Catalog, route: RouteMatch, request: web.BaseRequest,
                            ask: UpdateNamespaceProperties) -> Reply:
    """Apply removals and updates, then read the database back: a change the Hive Metastore did
    not make (HMS 2.3's ``alter_database`` keeps a database's description, the ``comment``, and
    its location) is undone and answered 406 ``UnsupportedOperationException`` naming the
    keys, never reported as ``updated``."""
    db = route.db()
    overlap = set(ask.removals) & ask.updates.keys()
    if overlap:
        raise errors.Unprocessable(f"keys both removed and updated: {', '.join(sorted(overlap))}")
    if LOCATION in ask.removals:
        raise errors.BadRequest(f"{LOCATION} cannot be removed: a Hive Metastore database always has one")
    database = await catalog.database(db)
    if LOCATION in ask.updates:
        moved = await check_namespace(catalog, db, ask.updates[LOCATION])
        # its tables and views would stay at the old location, outside it, where no overlap check
        # looks: another namespace could then be placed over them (HMS 3 and later move it)
        if moved != stored(database.locationUri) and await catalog.client.call("get_all_tables", db_name=db):
            raise errors.Forbidden(f"namespace {db} holds tables or views: its {LOCATION} cannot change "
                                   "(they would stay where they are)")
    original = copy.deepcopy(database)
    current = properties_of(database)
    removed = [key for key in ask.removals if key in current]
    missing = [key for key in ask.removals if key not in current]
    for key in removed:
        current.pop(key)
    current.update(ask.updates)
    database.description = current.pop(COMMENT, None)
    database.locationUri = current.pop(LOCATION, database.locationUri)
    database.parameters = current
    await _alter(catalog, db, database)
    after = properties_of(await catalog.database(db))
    ignored = sorted({key for key, value in ask.updates.items() if after.get(key) != value}
                     | {key for key in removed if key in after})
    if ignored:
        await _alter(catalog, db, original)  # all or nothing: undo what it did apply
        raise errors.Unsupported(
            f"the Hive Metastore did not change {', '.join(ignored)} of namespace {db}, so nothing was "
            f"changed: HMS 2.3 cannot change a database's {COMMENT} (its description) or {LOCATION}")
    return Reply(body=UpdateNamespacePropertiesResponse(updated=sorted(ask.updates), removed=removed, missing=missing))


async def _alter(catalog: Catalog, db: str, database) -> None:
    try:
        await catalog.client.call("alter_database", dbname=db, db=database)
    except catalog.idl.NoSuchObjectException:
        raise errors.NoSuchNamespace(f"Namespace does not exist: {db}") from None
    except catalog.idl.MetaException as exc:
        raise errors.BadRequest(errors.hms_refused(exc, f"the properties of namespace {db}")) from None
