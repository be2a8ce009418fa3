"""The route table of the Iceberg REST Catalog this service answers (apache/iceberg
``open-api/rest-catalog-open-api.yaml``, its ``paths``; as Java's ``RESTCatalogAdapter.Route``
holds method, path, request and response types in one row): :data:`ROUTES`, one
:class:`Endpoint` per operation with its handler itself (a closed internal set: no strings).
How a path picks a row is :mod:`gateway.iceberg.paths`; ``GET /v1/config``'s ``endpoints``
derive from the table (:data:`ENDPOINTS`).

Every handler has one signature::

    async def handler(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply

``catalog`` the request's :class:`~gateway.iceberg.catalog.Catalog` (HMS client acting as the
caller, policy view, metadata files, ``catalog.service`` the serving service's
:class:`~gateway.iceberg.service.IcebergService`), ``route`` the matched
:class:`~gateway.iceberg.paths.Route` (validated namespace and table), ``request`` for the
query and headers, ``body`` the whole request body (already read within the limits). A handler
answers a :class:`~gateway.iceberg.catalog.Reply` or raises an
:class:`~gateway.iceberg.errors.IcebergError`.

Adding an operation: one row here, the handler in its module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pyiceberg.catalog.rest import (
    CommitTableResponse,
    ConfigResponse,
    ListNamespaceResponse,
    ListTablesResponse,
    ListViewsResponse,
    LoadCredentialsResponse,
    NamespaceResponse,
    TableResponse,
    UpdateNamespacePropertiesResponse,
    ViewResponse,
)

from gateway.iceberg import commit, delegation, metrics_report, namespaces, oauth, register, signer, tables
from gateway.iceberg import transactions, views
from gateway.iceberg.bodies import CommitRequest, CreateNamespace, CreateTableRequest, RenameTable
from gateway.iceberg.bodies import UpdateNamespaceProperties
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.errors import IcebergError
from gateway.iceberg.paths import Route, Router
from gateway.iceberg.view_updates import CommitViewRequest, CreateViewRequest
from gateway.iceberg.warehouses import config_overrides

Handler = Callable[[Catalog, Route, web.BaseRequest, bytes], Awaitable[Reply]]

__all__ = ["ENDPOINTS", "Endpoint", "ROUTES", "Route", "endpoint", "match"]


@dataclass(frozen=True)
class Endpoint:
    """One row: ``method`` and ``path`` (template) of the spec's ``operation`` (operationId),
    the ``request`` body's model and the ``response`` body's model (PyIceberg's, the client's
    reading of the spec; None: no body), and the ``handler``."""

    method: str
    path: str
    operation: str
    request: Any
    response: Any
    handler: Handler
    #: Answered without the service's request-side steps: it authenticates its caller itself.
    public: bool = False
    #: How its refusals are written when not in the catalog's error model (the token endpoint's
    #: OAuth2 errors).
    error_model: Callable[[IcebergError], IcebergError] | None = None
    #: Listed in ``GET /v1/config``'s ``endpoints`` (the catalog's routes, below ``{prefix}``).
    listed: bool = True


async def get_config(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """The spec's ``CatalogConfig``: ``overrides.prefix`` for a ``warehouse`` the service has
    (:func:`gateway.iceberg.warehouses.config_overrides`; 400 for one it has not)."""
    overrides = config_overrides(catalog.service.warehouses, request.query.get("warehouse"))
    return Reply(body={"defaults": {}, "overrides": overrides, "endpoints": list(ENDPOINTS)})


_NS, _TABLE, _VIEW = "/v1/namespaces/{namespace}", "/v1/namespaces/{namespace}/tables/{table}", \
    "/v1/namespaces/{namespace}/views/{view}"
E = Endpoint
#: The table.
ROUTES: tuple[Endpoint, ...] = (
    E("GET", "/v1/config", "getConfig", None, ConfigResponse, get_config, listed=False),
    E("POST", "/v1/oauth/tokens", "getToken", None, None, oauth.get_token, public=True,
      error_model=oauth.oauth_error, listed=False),
    E("GET", "/v1/namespaces", "listNamespaces", None, ListNamespaceResponse, namespaces.list_namespaces),
    E("POST", "/v1/namespaces", "createNamespace", CreateNamespace, NamespaceResponse, namespaces.create_namespace),
    E("GET", _NS, "loadNamespaceMetadata", None, NamespaceResponse, namespaces.load_namespace),
    E("HEAD", _NS, "namespaceExists", None, None, namespaces.namespace_exists),
    E("DELETE", _NS, "dropNamespace", None, None, namespaces.drop_namespace),
    E("POST", f"{_NS}/properties", "updateProperties", UpdateNamespaceProperties, UpdateNamespacePropertiesResponse,
      namespaces.update_properties),
    E("GET", f"{_NS}/tables", "listTables", None, ListTablesResponse, tables.list_tables),
    E("POST", f"{_NS}/tables", "createTable", CreateTableRequest, TableResponse, tables.create_table),
    E("POST", f"{_NS}/register", "registerTable", register.RegisterTableRequest, TableResponse,
      register.register_table),
    E("GET", _TABLE, "loadTable", None, TableResponse, tables.load_table),
    E("HEAD", _TABLE, "tableExists", None, None, tables.table_exists),
    E("POST", _TABLE, "updateTable", CommitRequest, CommitTableResponse, commit.commit_table),
    E("DELETE", _TABLE, "dropTable", None, None, tables.drop_table),
    E("POST", "/v1/tables/rename", "renameTable", RenameTable, None, tables.rename_table),
    E("POST", f"{_TABLE}/metrics", "reportMetrics", metrics_report.ScanReport | metrics_report.CommitReport, None,
      metrics_report.report_metrics),
    E("GET", f"{_TABLE}/credentials", "loadCredentials", None, LoadCredentialsResponse, delegation.load_credentials),
    # Polaris-style, per table; served below a {prefix} (its URL is the table's), not a catalog endpoint
    E("POST", f"{_TABLE}/s3-sign", "signS3Request", signer.SignRequest, None, signer.sign, listed=False),
    E("POST", "/v1/transactions/commit", "commitTransaction", None, None, transactions.commit_transaction),
    E("GET", f"{_NS}/views", "listViews", None, ListViewsResponse, views.list_views),
    E("POST", f"{_NS}/views", "createView", CreateViewRequest, ViewResponse, views.create_view),
    E("GET", _VIEW, "loadView", None, ViewResponse, views.load_view),
    E("POST", _VIEW, "replaceView", CommitViewRequest, ViewResponse, views.replace_view),
    E("DELETE", _VIEW, "dropView", None, None, views.drop_view),
    E("HEAD", _VIEW, "viewExists", None, None, views.view_exists),
    E("POST", "/v1/views/rename", "renameView", RenameTable, None, views.rename_view),
    E("POST", f"{_NS}/register-view", "registerView", register.RegisterViewRequest, ViewResponse,
      register.register_view),
)
del E

#: operationId → its row.
_BY_OPERATION: dict[str, Endpoint] = {row.operation: row for row in ROUTES}

#: ``GET /v1/config``'s ``endpoints``: every catalog route, as the spec writes them.
ENDPOINTS: tuple[str, ...] = tuple(
    f"{row.method} {row.path.replace('/v1/', '/v1/{prefix}/', 1)}" for row in ROUTES if row.listed
)

_ROUTER = Router((row.method, row.path, row.operation) for row in ROUTES)


def match(method: str, path: str, warehouses: Collection[str] = ()) -> Route:
    """The route of ``method`` on ``path`` (:meth:`gateway.iceberg.paths.Router.match`, which
    names the errors raised)."""
    return _ROUTER.match(method, path, warehouses)


def endpoint(operation: str) -> Endpoint:
    """The row of ``operation``. Raises ``KeyError`` for an operationId the table lacks."""
    return _BY_OPERATION[operation]
