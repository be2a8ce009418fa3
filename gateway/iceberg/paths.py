"""How a request's path below an ``iceberg-rest`` service picks a row of the route table
(:data:`gateway.iceberg.routes.ROUTES`, the spec's ``paths``): :class:`PathMatcher`, and the
:class:`RouteMatch` a handler is given. A catalog route is also served below a ``{prefix}``,
``/v1/{prefix}/namespaces/...``: the name of one of the service's warehouses
(:mod:`gateway.iceberg.warehouses`), which ``GET /v1/config?warehouse=...`` answers as the
``prefix`` override.

A path's segments are percent-decoded one by one after splitting on ``/`` (a name may hold an
encoded ``/``); a namespace segment is split on the unit separator ``0x1F``, the spec's default
``namespace-separator``. Names HMS would refuse (``[A-Za-z0-9_]`` only, HMS's
``MetaStoreUtils.validateName``; at most 128 characters, its column width) are 400 here, before
anything reaches HMS. HMS has one namespace level, so a nested namespace does not exist: reading
it, or a table or view in it, is the spec's 404 (``NoSuchNamespaceException``,
``NoSuchTableException``, ``NoSuchViewException``; Iceberg's Java client reads the metadata
table ``ns.t.snapshots`` by loading table ``snapshots`` of namespace ``ns.t`` first and falls
back only on that 404), and writing into it is 400.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from gateway.iceberg.errors import (
    BadRequest, IcebergError, MethodNotAllowed, NoSuchNamespace, NoSuchTable, NoSuchView, NotFound,
)

NAMESPACE_SEPARATOR = "\x1f"
_NAME = re.compile(r"[A-Za-z0-9_]{1,128}")

#: Routes never served below a ``{prefix}`` (the signer is: its URL is the table's).
NEVER_PREFIXED = frozenset({"getConfig", "getToken"})
#: First path segments after ``/v1/`` of the routes: no warehouse may be named so
#: (tests/unit/test_iceberg_operations.py checks them against the table).
RESERVED_PREFIXES = frozenset({"config", "oauth", "namespaces", "tables", "transactions", "views"})

#: What a read of a nested namespace's objects answers: the object does not exist (404).
_MISSING_WHEN_NESTED: dict[str, type[IcebergError]] = {
    **dict.fromkeys(("loadNamespaceMetadata", "namespaceExists", "dropNamespace", "listTables",
                     "listViews"), NoSuchNamespace),
    **dict.fromkeys(("loadTable", "tableExists", "dropTable", "loadCredentials", "planTableScan",
                     "fetchPlanningResult", "cancelPlanning", "fetchScanTasks"), NoSuchTable),
    **dict.fromkeys(("loadView", "viewExists", "dropView"), NoSuchView),
}

@dataclass(frozen=True)
class RouteMatch:
    """A matched request: ``operation`` (an operationId), ``namespace``/``table`` when the path
    names them (validated HMS names; ``table`` is also a path's ``{view}``: a view is an HMS
    table), ``warehouse`` the ``{prefix}`` when the path has one."""

    operation: str
    namespace: str | None = None
    table: str | None = None
    #: The warehouse the path's ``{prefix}`` names (None: no prefix).
    warehouse: str | None = None
    #: The path's ``{plan-id}`` (server-side scan planning), as sent.
    plan_id: str | None = None

    def db(self) -> str:
        """The namespace of a route whose template has ``{namespace}``."""
        assert self.namespace is not None
        return self.namespace

    def db_table(self) -> tuple[str, str]:
        """(namespace, table or view) of a route whose template has both."""
        assert self.namespace is not None and self.table is not None
        return self.namespace, self.table


def hms_name(value: str, what: str) -> str:
    """``value`` when HMS accepts it as a database or table name. Raises :class:`BadRequest`."""
    if not _NAME.fullmatch(value):
        raise BadRequest(f"invalid {what} name {value[:200]!r}: the Hive Metastore accepts only "
                         "letters, digits and '_' (1 to 128 characters)")
    return value


def namespace_name(levels: list[str], missing: type[IcebergError] | None = None, table: str | None = None) -> str:
    """The HMS database a namespace (its levels) is. Raises :class:`BadRequest` for an empty
    namespace and for names HMS refuses; for a nested namespace, ``missing`` (a 404 naming the
    namespace, or ``table`` in it) when given, else :class:`BadRequest`."""
    if not levels or levels == [""]:
        raise BadRequest("the namespace is empty")
    if len(levels) != 1:
        dotted = ".".join(levels)[:200]
        if missing is NoSuchNamespace:
            raise missing(f"Namespace does not exist: {dotted} (the Hive Metastore has one namespace level)")
        if missing is not None:
            what = "View" if missing is NoSuchView else "Table"
            raise missing(f"{what} does not exist: {dotted}.{(table or '')[:200]} "
                          "(the Hive Metastore has one namespace level)")
        raise BadRequest(f"nested namespaces are not supported: the Hive Metastore has one level "
                         f"(got {len(levels)} levels)")
    return hms_name(levels[0], "namespace")


def _decode(segment: str) -> str:
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise BadRequest("a path segment is not UTF-8 after percent-decoding") from None


class PathMatcher:
    """Matches requests against ``rows``: ``(method, path template, operationId)`` triples."""

    def __init__(self, rows: Iterable[tuple[str, str, str]]):
        #: Each template split into its segments, once.
        self._split = tuple((method, tuple(template.split("/")[1:]), operation) for method, template, operation in rows)

    def match(self, method: str, path: str, warehouses: Collection[str] = ()) -> RouteMatch:
        """The route of ``method`` on ``path`` (below the service path, starting with ``/``); a
        catalog route may have a ``{prefix}`` segment after ``/v1`` naming one of ``warehouses``.

        Raises :class:`NotFound` for a path the API does not have, :class:`MethodNotAllowed`
        (with ``Allow``) for a method the path does not take, :class:`BadRequest` for bad names,
        a 404 of the object's type for a read in a nested namespace."""
        segments = path.split("/")[1:]
        warehouse = None
        if len(segments) > 2 and segments[0] == "v1" and segments[1] in warehouses:
            warehouse = segments.pop(1)
        allowed: list[str] = []
        for route_method, parts, operation in self._split:
            if len(parts) != len(segments) or (warehouse is not None and operation in NEVER_PREFIXED):
                continue
            if any(p != s for p, s in zip(parts, segments) if not p.startswith("{")):
                continue
            if route_method != method:
                allowed.append(route_method)
                continue
            names = {p[1:-1]: _decode(s) for p, s in zip(parts, segments) if p.startswith("{")}
            namespace = names.get("namespace")
            kind = "view" if "view" in names else "table"
            table = names.get(kind)
            return RouteMatch(
                operation,
                None if namespace is None else namespace_name(namespace.split(NAMESPACE_SEPARATOR),
                                                              _MISSING_WHEN_NESTED.get(operation), table),
                None if table is None else hms_name(table, kind),
                warehouse,
                names.get("plan-id"),
            )
        if allowed:
            raise MethodNotAllowed(f"{method} is not allowed on {path[:200]}",
                                   [("Allow", ", ".join(sorted(set(allowed))))])
        raise NotFound(f"no such Iceberg REST endpoint: {path[:200]}")
