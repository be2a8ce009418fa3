"""The route table of the Iceberg REST Catalog this service answers (apache/iceberg
``open-api/rest-catalog-open-api.yaml``, its ``paths``; as Java's ``RESTCatalogAdapter.RouteMatch``
holds method, path, request and response types in one row): :data:`ROUTES`, one
:class:`Route` per operation with its handler itself (a closed internal set: no strings).
How a path picks a row is :mod:`gateway.iceberg.paths`; ``GET /v1/config``'s ``endpoints``
derive from the table (:data:`ENDPOINTS`).

A row's models are what runs (:func:`answer`): the request model reads the body before the
handler runs (:func:`gateway.iceberg.bodies.read`: a body that does not read is the spec's 400
``BadRequestException`` there, once for all rows), and the handler's answer must be an instance
of the response model, which writes the JSON (``model_dump_json``); a row without a response
model answers no body. Every handler has one signature::

    async def handler(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask) -> Reply

``catalog`` the request's :class:`~gateway.iceberg.catalog.Catalog` (HMS client acting as the
caller, policy view, metadata files, ``catalog.service`` the serving service's
:class:`~gateway.iceberg.service_state.ServiceState`), ``route`` the matched
:class:`~gateway.iceberg.paths.RouteMatch` (validated namespace and table), ``request`` for the
query and headers, ``ask`` the body read as the row's request model (None for a row without
one). A handler answers a :class:`~gateway.iceberg.catalog.Reply` or raises an
:class:`~gateway.iceberg.errors.IcebergError`.

Adding an operation: one row here, the handler in its module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pyiceberg.catalog.rest import (
    LoadCredentialsResponse,
    NamespaceResponse,
    UpdateNamespacePropertiesResponse,
    ViewResponse,
)
from pyiceberg.catalog.rest.response import TokenResponse

from gateway.iceberg import commit, delegation, metrics_report, namespaces, oauth, register, signer, tables
from gateway.iceberg import access as needs, scan_plans, transactions, views
from gateway.iceberg.access import LOCATION_CONFINEMENT as LOC, PUBLIC, RESERVED_PROPERTIES as RESERVED, STORAGE
from gateway.iceberg.access import Declared, by_body, enforce, on_namespace, on_table, on_view, state
from gateway.iceberg.bodies import CatalogConfig, CommitRequest, CreateNamespace, CreateTableRequest
from gateway.iceberg.bodies import ListNamespaces, ListTables, ListViews, RenameTable, UpdateNamespaceProperties, read
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.errors import IcebergError
from gateway.iceberg.objects import LoadTableResult
from gateway.iceberg.paths import PathMatcher, RouteMatch
from gateway.iceberg.plan_models import FetchedPlanningResult, FetchScanTasksRequest, PlanningResult
from gateway.iceberg.plan_models import PlanTableScanRequest, ScanTaskList
from gateway.iceberg.view_updates import CommitViewRequest, CreateViewRequest
from gateway.iceberg.warehouses import config_overrides

Handler = Callable[[Catalog, RouteMatch, web.BaseRequest, Any], Awaitable[Reply]]

__all__ = ["ENDPOINTS", "Route", "ROUTES", "RouteMatch", "answer", "match", "route_of"]


@dataclass(frozen=True)
class Route:
    """One row: ``method`` and ``path`` (template) of the spec's ``operation`` (operationId),
    the ``request`` body's model (PyIceberg's where it has one, else the spec's shape in the
    handler's module; None: the body is not read) and the ``response`` body's model (None: no
    body), and the ``handler``."""

    method: str
    path: str
    operation: str
    request: Any
    response: type[BaseModel] | None
    handler: Handler
    #: Answered without the service's request-side steps: it authenticates its caller itself.
    public: bool = False
    #: How its refusals are written when not in the catalog's error model (the token endpoint's
    #: OAuth2 errors).
    error_model: Callable[[IcebergError], IcebergError] | None = None
    #: Listed in ``GET /v1/config``'s ``endpoints`` (the catalog's routes, below ``{prefix}``).
    listed: bool = True
    #: What the operation needs, enforced before the handler runs (:mod:`gateway.iceberg.access`;
    #: None on a non-public row is a gateway bug: refused, and a unit test fails).
    access: Declared | None = None
    #: Called with each refusal (an :class:`IcebergError` of the enforcer or the handler), to count it.
    refused: Callable[[Catalog, IcebergError], None] | None = None


    def written(self, reply: Reply) -> Reply:
        """``reply`` with its body written as JSON by the row's response model. Raises
        ``TypeError`` (a gateway bug, answered 500) for a body that is not an instance of it."""
        if reply.body is None:
            return reply
        if self.response is None or not isinstance(reply.body, self.response):
            raise TypeError(f"{self.operation} answered {type(reply.body).__name__}, not its response model "
                            f"{getattr(self.response, '__name__', None)}")
        return replace(reply, body=reply.body.model_dump_json(by_alias=True).encode())


async def get_config(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: None) -> Reply:
    """The spec's ``CatalogConfig``: ``overrides.prefix`` for a ``warehouse`` the service has
    (:func:`gateway.iceberg.warehouses.config_overrides`; 400 for one it has not)."""
    overrides = config_overrides(catalog.service.warehouses, request.query.get("warehouse"))
    return Reply(body=CatalogConfig(overrides=overrides, endpoints=list(ENDPOINTS)))


_NS, _TABLE, _VIEW = "/v1/namespaces/{namespace}", "/v1/namespaces/{namespace}/tables/{table}", \
    "/v1/namespaces/{namespace}/views/{view}"
E = Route
_T, _NT, _NV = ("namespace", "table"), ("namespace",), ("namespace", "view")
#: The table.
ROUTES: tuple[Route, ...] = (
    E("GET", "/v1/config", "getConfig", None, CatalogConfig, get_config, listed=False, access=PUBLIC),
    E("POST", "/v1/oauth/tokens", "getToken", oauth.TokenRequest, TokenResponse, oauth.get_token, public=True,
      error_model=oauth.oauth_error, listed=False, access=PUBLIC),
    E("GET", "/v1/namespaces", "listNamespaces", None, ListNamespaces, namespaces.list_namespaces,
      access=by_body("visible (`_any`) `parent`; lists the visible only", "catalog", (), needs.list_namespaces)),
    E("POST", "/v1/namespaces", "createNamespace", CreateNamespace, NamespaceResponse, namespaces.create_namespace,
      access=by_body("`create` on the body's namespace", "namespace", (), needs.create_namespace, RESERVED, LOC)),
    E("GET", _NS, "loadNamespaceMetadata", None, NamespaceResponse, namespaces.load_namespace,
      access=on_namespace("")),
    E("HEAD", _NS, "namespaceExists", None, None, namespaces.namespace_exists, access=on_namespace("")),
    E("DELETE", _NS, "dropNamespace", None, None, namespaces.drop_namespace, access=on_namespace("drop")),
    E("POST", f"{_NS}/properties", "updateProperties", UpdateNamespaceProperties, UpdateNamespacePropertiesResponse,
      namespaces.update_properties, access=by_body("`alter`", "namespace", _NT, needs.update_namespace, RESERVED, LOC)),
    E("GET", f"{_NS}/tables", "listTables", None, ListTables, tables.list_tables, access=on_namespace("")),
    E("POST", f"{_NS}/tables", "createTable", CreateTableRequest, LoadTableResult, tables.create_table,
      access=by_body("`create` on the namespace", "namespace", _NT, needs.create_table, needs.ROW_FILTER_AND_MASKS,
                     RESERVED, LOC)),
    E("POST", f"{_NS}/register", "registerTable", register.RegisterTableRequest, LoadTableResult,
      register.register_table,
      access=by_body("`create` on the namespace", "namespace", _NT, needs.register_table, needs.ROW_FILTER_AND_MASKS, LOC)),
    E("GET", _TABLE, "loadTable", None, LoadTableResult, tables.load_table, access=on_table("select", *STORAGE)),
    E("HEAD", _TABLE, "tableExists", None, None, tables.table_exists, access=on_table("")),
    # the spec's CommitTableResponse, answered as a LoadTableResult (with its config) as before
    E("POST", _TABLE, "updateTable", CommitRequest, LoadTableResult, commit.commit_table,
      access=by_body("`update` (data updates) and/or `alter` (the others); a staged create: `create` on the "
                     "namespace", "table", _T, needs.commit_table, *STORAGE, RESERVED, LOC)),
    E("DELETE", _TABLE, "dropTable", None, None, tables.drop_table, access=on_table("drop", LOC)),
    E("POST", "/v1/tables/rename", "renameTable", RenameTable, None, tables.rename_table,
      access=by_body("`alter` on the source table, `create` on the destination namespace", "table", (),
                     needs.rename_table)),
    E("POST", f"{_TABLE}/metrics", "reportMetrics", metrics_report.ReportMetricsRequest, None,
      metrics_report.report_metrics, access=on_table("", *STORAGE)),
    E("GET", f"{_TABLE}/credentials", "loadCredentials", None, LoadCredentialsResponse, delegation.load_credentials,
      access=on_table("select", *STORAGE, LOC)),
    # the spec's signer endpoint (#15450: the default a client without signer.endpoint uses), and the
    # same per table at the path PyIceberg 0.12 and Iceberg Java 1.10 are given (s3.signer.endpoint)
    E("POST", f"{_TABLE}/sign", "signRequest", signer.SignRequest, signer.SignResponse, signer.sign,
      refused=signer.refused,
      access=by_body("`select` (GET, HEAD) or `update` (PUT, POST, DELETE)", "table", _T, needs.sign, *STORAGE, LOC)),
    E("POST", f"{_TABLE}/s3-sign", "signS3Request", signer.SignRequest, signer.SignResponse, signer.sign,
      listed=False, refused=signer.refused,
      access=by_body("`select` (GET, HEAD) or `update` (PUT, POST, DELETE)", "table", _T, needs.sign, *STORAGE, LOC)),
    E("POST", f"{_TABLE}/plan", "planTableScan", PlanTableScanRequest, PlanningResult, scan_plans.plan_table_scan,
      access=on_table("select", *STORAGE)),
    E("GET", f"{_TABLE}/plan/{{plan-id}}", "fetchPlanningResult", None, FetchedPlanningResult,
      scan_plans.fetch_planning_result, access=on_table("select", *STORAGE)),
    E("DELETE", f"{_TABLE}/plan/{{plan-id}}", "cancelPlanning", None, None, scan_plans.cancel_planning,
      access=on_table("select", *STORAGE)),
    E("POST", f"{_TABLE}/tasks", "fetchScanTasks", FetchScanTasksRequest, ScanTaskList, scan_plans.fetch_scan_tasks,
      access=on_table("select", *STORAGE)),
    E("POST", "/v1/transactions/commit", "commitTransaction", transactions.CommitTransactionRequest, None,
      transactions.commit_transaction,
      access=by_body("each table's as `updateTable`'s", "table", (), needs.commit_transaction, *STORAGE, RESERVED,
                     LOC)),
    E("GET", f"{_NS}/views", "listViews", None, ListViews, views.list_views, access=on_namespace("")),
    E("POST", f"{_NS}/views", "createView", CreateViewRequest, ViewResponse, views.create_view,
      access=by_body("`create` on the namespace", "namespace", _NT, needs.create_view, RESERVED, LOC)),
    E("GET", _VIEW, "loadView", None, ViewResponse, views.load_view, access=on_view("select")),
    E("POST", _VIEW, "replaceView", CommitViewRequest, ViewResponse, views.replace_view,
      access=by_body("`alter`", "view", _NV, needs.replace_view, RESERVED, LOC)),
    E("DELETE", _VIEW, "dropView", None, None, views.drop_view, access=on_view("drop")),
    E("HEAD", _VIEW, "viewExists", None, None, views.view_exists, access=on_view("")),
    E("POST", "/v1/views/rename", "renameView", RenameTable, None, views.rename_view,
      access=by_body("`alter` on the source view, `create` on the destination namespace", "view", (),
                     needs.rename_view)),
    E("POST", f"{_NS}/register-view", "registerView", register.RegisterViewRequest, ViewResponse,
      register.register_view, access=by_body("`create` on the namespace", "namespace", _NT, needs.register_view, LOC)),
)
del E

#: operationId → its row.
_BY_OPERATION: dict[str, Route] = {row.operation: row for row in ROUTES}

#: ``GET /v1/config``'s ``endpoints``: every catalog route, as the spec writes them.
ENDPOINTS: tuple[str, ...] = tuple(
    f"{row.method} {row.path.replace('/v1/', '/v1/{prefix}/', 1)}" for row in ROUTES if row.listed
)

_MATCHER = PathMatcher((row.method, row.path, row.operation) for row in ROUTES)


def match(method: str, path: str, warehouses: Collection[str] = ()) -> RouteMatch:
    """The route of ``method`` on ``path`` (:meth:`gateway.iceberg.paths.PathMatcher.match`, which
    names the errors raised)."""
    return _MATCHER.match(method, path, warehouses)


async def answer(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, body: bytes) -> Reply:
    """The route's row run on one request: its request model reads ``body`` (the whole request
    body, read within the limits), its handler answers, its response model writes the answer's
    body (bytes); the row's declared access is enforced once in between
    (:func:`gateway.iceberg.access.enforce`), and a load result answered states the caller's
    read restrictions as its rules say (:func:`gateway.iceberg.access.state`). Raises what the
    reading, the enforcer, the handler and the stating raise."""
    row = _BY_OPERATION[route.operation]
    ask = read(row.request, catalog, request, body)
    try:
        needs = await enforce(catalog, row.access, route, request, ask)
        reply = await state(catalog, needs, await row.handler(catalog, route, request, ask), written=row.method != "GET")
    except IcebergError as error:
        if row.refused is not None:
            row.refused(catalog, error)
        raise
    return row.written(reply)


def route_of(operation: str) -> Route:
    """The row of ``operation``. Raises ``KeyError`` for an operationId the table lacks."""
    return _BY_OPERATION[operation]
