"""Which handler answers each Iceberg REST operation: :data:`OPERATIONS` maps a spec
operationId (the third field of a :data:`gateway.iceberg.routes.ROUTES` entry) to the
``"module:function"`` of its handler, imported once, as :data:`gateway.services.KINDS`.

Every handler has one signature::

    async def handler(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply

``catalog`` the request's :class:`~gateway.iceberg.catalog.Catalog` (HMS client acting as the
caller, policy view, metadata files, ``catalog.service`` the serving service's
:class:`~gateway.iceberg.service.IcebergService`), ``route`` the matched :class:`~gateway.iceberg.routes.Route` (validated namespace and
table), ``request`` for the query and headers, ``body`` the whole request body (already read
within the limits). A handler answers a :class:`~gateway.iceberg.catalog.Reply` or raises an
:class:`~gateway.iceberg.errors.IcebergError`.

Adding an operation: one ``ROUTES`` line, one line here, the handler in its own module. The
handlers below adapt HTTP (query, headers) to the first slice's typed functions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache

from aiohttp import hdrs, web

from gateway.iceberg import commit, namespaces, tables
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.errors import IcebergError
from gateway.iceberg.routes import ENDPOINTS, Route
from gateway.iceberg.warehouses import config_overrides
from gateway.registry import resolve

Handler = Callable[[Catalog, Route, web.BaseRequest, bytes], Awaitable[Reply]]

_HERE = "gateway.iceberg.operations"

#: operationId → ``"module:function"`` of its handler.
OPERATIONS: dict[str, str] = {
    "getConfig": f"{_HERE}:get_config",
    "getToken": "gateway.iceberg.oauth:get_token",
    "listNamespaces": f"{_HERE}:list_namespaces",
    "createNamespace": f"{_HERE}:create_namespace",
    "loadNamespaceMetadata": f"{_HERE}:load_namespace",
    "namespaceExists": f"{_HERE}:namespace_exists",
    "dropNamespace": f"{_HERE}:drop_namespace",
    "updateProperties": f"{_HERE}:update_properties",
    "listTables": f"{_HERE}:list_tables",
    "createTable": f"{_HERE}:create_table",
    "registerTable": "gateway.iceberg.register:register_table",
    "registerView": "gateway.iceberg.register:register_view",
    "loadTable": f"{_HERE}:load_table",
    "tableExists": f"{_HERE}:table_exists",
    "updateTable": f"{_HERE}:update_table",
    "dropTable": f"{_HERE}:drop_table",
    "renameTable": f"{_HERE}:rename_table",
    "reportMetrics": "gateway.iceberg.metrics_report:report_metrics",
    "loadCredentials": "gateway.iceberg.delegation:load_credentials",
    "signS3Request": "gateway.iceberg.signer:sign",
    "commitTransaction": "gateway.iceberg.transactions:commit_transaction",
    "listViews": "gateway.iceberg.views:list_views",
    "createView": "gateway.iceberg.views:create_view",
    "loadView": "gateway.iceberg.views:load_view",
    "replaceView": "gateway.iceberg.views:replace_view",
    "dropView": "gateway.iceberg.views:drop_view",
    "viewExists": "gateway.iceberg.views:view_exists",
    "renameView": "gateway.iceberg.views:rename_view",
}

#: Operations answered without the service's request-side steps (they authenticate the caller
#: themselves): the OAuth2 token endpoint takes the client's credentials in its body.
PUBLIC: frozenset[str] = frozenset({"getToken"})

#: Operations whose refusals are not the catalog's error model: operationId → ``"module:function"``
#: turning an :class:`~gateway.iceberg.errors.IcebergError` into the operation's own (the token
#: endpoint's ``OAuthError``).
ERROR_MODELS: dict[str, str] = {"getToken": "gateway.iceberg.oauth:oauth_error"}


@cache
def handler(operation: str) -> Handler:
    """The handler registered for ``operation``. Raises ``LookupError`` for an operationId
    :data:`OPERATIONS` lacks."""
    target = OPERATIONS.get(operation)
    if target is None:
        raise LookupError(f"no handler registered for Iceberg REST operation {operation!r}")
    return resolve(target)


@cache
def error_model(operation: str | None) -> Callable[[IcebergError], IcebergError]:
    """How ``operation``'s refusals are written (the catalog's error model unless
    :data:`ERROR_MODELS` names another)."""
    target = ERROR_MODELS.get(operation or "")
    return resolve(target) if target else _same


def _same(error: IcebergError) -> IcebergError:
    return error


# --- the first slice's operations ----------------------------------------------------------------

async def get_config(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """The spec's ``CatalogConfig``: ``overrides.prefix`` for a ``warehouse`` the service has
    (:func:`gateway.iceberg.warehouses.config_overrides`; 400 for one it has not)."""
    overrides = config_overrides(catalog.service.warehouses, request.query.get("warehouse"))
    return Reply(body={"defaults": {}, "overrides": overrides, "endpoints": list(ENDPOINTS)})


async def list_namespaces(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await namespaces.list_namespaces(catalog, request.query)


async def create_namespace(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await namespaces.create_namespace(catalog, body)


async def load_namespace(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await namespaces.load_namespace(catalog, _namespace(route))


async def namespace_exists(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await namespaces.namespace_exists(catalog, _namespace(route))


async def drop_namespace(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await namespaces.drop_namespace(catalog, _namespace(route))


async def update_properties(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await namespaces.update_properties(catalog, _namespace(route), body)


async def list_tables(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await tables.list_tables(catalog, _namespace(route), request.query)


async def create_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await tables.create_table(catalog, _namespace(route), body, request)


async def load_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await tables.load_table(catalog, *_table(route), request.query,
                                   request.headers.get(hdrs.IF_NONE_MATCH), request)


async def table_exists(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await tables.table_exists(catalog, *_table(route))


async def update_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await commit.commit_table(catalog, *_table(route), body)


async def drop_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await tables.drop_table(catalog, *_table(route), request.query)


async def rename_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await tables.rename_table(catalog, body)


def _namespace(route: Route) -> str:
    assert route.namespace is not None  # the route's template has {namespace}
    return route.namespace


def _table(route: Route) -> tuple[str, str]:
    assert route.namespace is not None and route.table is not None  # the template has both
    return route.namespace, route.table
