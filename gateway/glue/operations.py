"""The Glue Data Catalog operations the gateway answers, over HMS and a catalog policy.

Each operation takes the request's JSON object (members as in botocore's
``glue/2017-03-31/service-2.json``) and returns the response's; errors are
:mod:`gateway.glue.errors` classes. Policy semantics are the Thrift API's
(:mod:`gateway.hms_thrift.steps.catalog_policy`), asked of one :class:`~gateway.policy.view.CatalogView`
per request: a database or table is listed and answered when the caller has some access on it or
below it (Ranger's ``_any``); one the caller may not see is ``EntityNotFoundException``, worded as
for a missing one; a column is shown when the caller has ``select`` on it. Without a policy
everything is visible.

==========================  ============================================================
operation                   HMS calls (as the caller)
==========================  ============================================================
GetDatabases                get_all_databases, get_database per database of the page
GetDatabase                 get_database
GetTables                   get_all_tables (get_tables with ``Expression`` as HMS's pattern),
                            get_table_objects_by_name for the page
GetTable                    get_table
GetPartitions               get_table, get_partitions (get_partitions_by_filter with
                            ``Expression``, HMS's filter language)
GetUnfilteredTableMetadata  get_table (trusted engines only)
==========================  ============================================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.glue import shapes
from gateway.glue.errors import AccessDenied, EntityNotFound, InvalidInput, PermissionTypeMismatch
from gateway.glue.pagination import max_results, page
from gateway.policy import CatalogView, PolicyEngine
from gateway.upstream.metastore import MetaException, MetastoreClient, NoSuchObjectException

Request = dict[str, Any]
Response = dict[str, Any]

#: ``SupportedPermissionTypes`` values, each including the ones before it (the seed's rule).
PERMISSION_TYPES = ("COLUMN_PERMISSION", "CELL_FILTER_PERMISSION", "NESTED_PERMISSION",
                    "NESTED_CELL_PERMISSION")
#: Lake Formation permission → the Ranger Hive access that grants it on a table.
LAKE_FORMATION_ACCESS = {"SELECT": "select", "ALTER": "alter", "DROP": "drop", "INSERT": "update",
                         "DELETE": "update"}
_NAME_MAX = 255
_FILTER_MAX = 2048
_TABLE_PAGE, _DATABASE_PAGE, _PARTITION_PAGE = 100, 100, 1000


@dataclass(frozen=True)
class Caller:
    """Who asks: ``user`` and ``groups`` the effective identity the policy judges; ``engine``
    the principal that called (the impersonator under ``doAs``, else the user itself)."""

    user: str
    groups: frozenset[str]
    engine: str


def _null(member: str) -> InvalidInput:
    return InvalidInput(f"1 validation error detected: Value null at '{member}' failed to "
                        "satisfy constraint: Member must not be null")


def _string(request: Request, member: str, *, required: bool = True, maximum: int = _NAME_MAX,
            minimum: int = 1) -> str | None:
    value = request.get(member)
    if value is None:
        if required:
            raise _null(member)
        return None
    if not isinstance(value, str) or not minimum <= len(value) <= maximum:
        raise InvalidInput(f"1 validation error detected: Value at '{member}' failed to satisfy "
                           f"constraint: Member must be a string of length {minimum} to {maximum}")
    return value


def _structure(request: Request, member: str) -> None:
    value = request.get(member)
    if value is not None and not isinstance(value, dict):
        raise InvalidInput(f"{member} must be a structure")


def _strings(request: Request, member: str, *, required: bool = False) -> list[str] | None:
    value = request.get(member)
    if value is None:
        if required:
            raise _null(member)
        return None
    if not isinstance(value, list) or not 1 <= len(value) <= 255 or \
            not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{member} must be a list of 1 to 255 strings")
    return value


def _boolean(request: Request, member: str) -> bool:
    value = request.get(member, False)
    if not isinstance(value, bool):
        raise InvalidInput(f"{member} must be a boolean")
    return value


class GlueCatalog:
    """The operations over ``metastore`` (one per request: it calls HMS as the caller), judged
    by ``policy`` (None: no catalog policy). ``catalog_id`` is the catalog's Glue id (a request
    naming another is ``EntityNotFoundException``); ``trusted_engines`` the principals that may
    call ``GetUnfilteredTableMetadata``."""

    def __init__(self, metastore: MetastoreClient, caller: Caller, policy: PolicyEngine | None,
                 catalog_id: str, trusted_engines: frozenset[str]):
        self.metastore, self.caller, self.policy = metastore, caller, policy
        self.catalog_id, self.trusted_engines = catalog_id, trusted_engines
        #: (database, table) the operation named, for the audit line.
        self.object: tuple[str | None, str | None] = (None, None)
        #: What the caller sees; its ``hidden`` and ``hidden_columns`` are the audit's counts.
        self.view = CatalogView(policy, caller.user, caller.groups)
        #: The policy's part, for the audit line: "allowed"/"denied" (None: no policy or no
        #: decision yet).
        self.decision: str | None = None

    @property
    def hidden(self) -> int:
        """How many listed objects the policy hid."""
        return self.view.hidden

    @property
    def columns_hidden(self) -> int:
        """How many distinct columns the policy removed from the response."""
        return len(self.view.hidden_columns)

    def operation(self, name: str) -> Callable[[Request], Awaitable[Response]] | None:
        """The coroutine serving operation ``name`` (``X-Amz-Target``'s part after
        ``AWSGlue.``), or None when the gateway does not answer it."""
        attribute = self._OPERATIONS.get(name)
        return getattr(self, attribute) if attribute else None

    _OPERATIONS = {
        "GetDatabases": "get_databases",
        "GetDatabase": "get_database",
        "GetTables": "get_tables",
        "GetTable": "get_table",
        "GetPartitions": "get_partitions",
        "GetUnfilteredTableMetadata": "get_unfiltered_table_metadata",
    }

    # --- the policy -------------------------------------------------------------------------

    def _visible(self, database: str, table: str | None = None) -> bool:
        seen = self.view.visible(database, table)
        if self.policy is not None:
            self.decision = "allowed" if seen else "denied"
        return seen

    def _authorized(self, t) -> list[str]:
        """The names of ``t``'s columns (data, then partition keys) the caller may select."""
        names = [f.name for f in (t.sd.cols if t.sd else None) or ()]
        names += [f.name for f in t.partitionKeys or ()]
        return self.view.columns(t.dbName, t.tableName, names)

    def _restrictions(self, t):
        """The row filter and masks (Ranger's row-filter and data-mask policies) on ``t`` for the
        caller, over its columns (data, then partition keys) with their Hive types."""
        fields = [*((t.sd.cols if t.sd else None) or ()), *(t.partitionKeys or ())]
        return self.view.restrictions(t.dbName, t.tableName, [f.name for f in fields],
                                      {f.name: f.type for f in fields if f.type})

    def _listed(self, shown: list[str]) -> list[str]:
        if self.policy is not None:
            self.decision = "allowed"
        return shown

    def _catalog(self, request: Request, *, required: bool = False) -> None:
        catalog = _string(request, "CatalogId", required=required)
        if catalog is not None and catalog != self.catalog_id:
            raise EntityNotFound(f"Catalog {catalog} not found.")

    # --- HMS --------------------------------------------------------------------------------

    async def _database(self, name: str):
        if not self._visible(name):
            raise EntityNotFound(f"Database {name} not found.")
        try:
            return await self.metastore.call("get_database", name=name)
        except NoSuchObjectException:
            raise EntityNotFound(f"Database {name} not found.") from None

    async def _table(self, database: str, name: str):
        self.object = (database, name)
        if not self._visible(database, name):
            raise EntityNotFound(f"Table {name} not found.")
        try:
            return await self.metastore.call("get_table", dbname=database, tbl_name=name)
        except NoSuchObjectException:
            raise EntityNotFound(f"Table {name} not found.") from None

    def _shown(self, t) -> shapes.Shape:
        """``t`` as the caller may see it: only the data columns it may select."""
        keep = None if self.policy is None else {n.lower() for n in self._authorized(t)}
        return shapes.table(t, self.catalog_id, keep, lake_formation=self.policy is not None)

    # --- operations -------------------------------------------------------------------------

    async def get_databases(self, request: Request) -> Response:
        self._catalog(request)
        limit = max_results(request.get("MaxResults"), _DATABASE_PAGE)
        names = await self.metastore.call("get_all_databases")
        names = self._listed(self.view.visible_databases(names))
        chosen, token = page(names, str.lower, operation="GetDatabases", scope=[],
                             token=request.get("NextToken"), limit=limit)
        found = await asyncio.gather(*(self._existing_database(n) for n in chosen))
        out: Response = {"DatabaseList": [shapes.database(d, self.catalog_id) for d in found if d]}
        if token:
            out["NextToken"] = token
        return out

    async def _existing_database(self, name: str):
        try:
            return await self.metastore.call("get_database", name=name)
        except NoSuchObjectException:  # dropped since it was listed
            return None

    async def get_database(self, request: Request) -> Response:
        self._catalog(request)
        name = _string(request, "Name")
        self.object = (name, None)
        return {"Database": shapes.database(await self._database(name), self.catalog_id)}

    async def get_tables(self, request: Request) -> Response:
        self._catalog(request)
        database = _string(request, "DatabaseName")
        expression = _string(request, "Expression", required=False, maximum=_FILTER_MAX, minimum=0)
        limit = max_results(request.get("MaxResults"), _TABLE_PAGE)
        self.object = (database, None)
        await self._database(database)
        if expression:
            names = await self._filtered("get_tables", db_name=database, pattern=expression)
        else:
            names = await self.metastore.call("get_all_tables", db_name=database)
        names = self._listed(self.view.visible_tables(database, names))
        chosen, token = page(names, str.lower, operation="GetTables",
                             scope=[database.lower(), expression or ""],
                             token=request.get("NextToken"), limit=limit)
        tables = await self.metastore.call("get_table_objects_by_name", dbname=database,
                                           tbl_names=chosen) if chosen else []
        by_name = {t.tableName.lower(): t for t in tables}
        out: Response = {"TableList": [self._shown(by_name[n.lower()]) for n in chosen
                                       if n.lower() in by_name]}
        if token:
            out["NextToken"] = token
        return out

    async def get_table(self, request: Request) -> Response:
        self._catalog(request)
        database, name = _string(request, "DatabaseName"), _string(request, "Name")
        return {"Table": self._shown(await self._table(database, name))}

    async def get_partitions(self, request: Request) -> Response:
        self._catalog(request)
        database, name = _string(request, "DatabaseName"), _string(request, "TableName")
        expression = _string(request, "Expression", required=False, maximum=_FILTER_MAX, minimum=0)
        limit = max_results(request.get("MaxResults"), _PARTITION_PAGE)
        segment = self._segment(request)
        exclude_columns = _boolean(request, "ExcludeColumnSchema")
        t = await self._table(database, name)
        if expression:
            partitions = await self._filtered("get_partitions_by_filter", db_name=database,
                                              tbl_name=name, filter=expression, max_parts=-1)
        else:
            partitions = await self.metastore.call("get_partitions", db_name=database,
                                                   tbl_name=name, max_parts=-1)
        if segment is not None:
            number, total = segment
            ordered = sorted(partitions, key=lambda p: list(p.values or ()))
            partitions = ordered[number::total]
        chosen, token = page(partitions, lambda p: list(p.values or ()), operation="GetPartitions",
                             scope=[database.lower(), name.lower(), expression or "",
                                    list(segment or ())],
                             token=request.get("NextToken"), limit=limit)
        keep = None if self.policy is None else {n.lower() for n in self._authorized(t)}
        out: Response = {"Partitions": [
            shapes.partition(p, self.catalog_id, keep, with_columns=not exclude_columns)
            for p in chosen]}
        if token:
            out["NextToken"] = token
        return out

    async def _filtered(self, method: str, **args: Any) -> Any:
        """``method`` called with a client's ``Expression``: HMS's ``MetaException`` (it could not
        parse or run it) is the client's ``InvalidInputException``."""
        try:
            return await self.metastore.call(method, **args)
        except MetaException as exc:
            raise InvalidInput(f"Invalid Expression: {exc.message or ''}"[:1024]) from None

    @staticmethod
    def _segment(request: Request) -> tuple[int, int] | None:
        segment = request.get("Segment")
        if segment is None:
            return None
        number = segment.get("SegmentNumber") if isinstance(segment, dict) else None
        total = segment.get("TotalSegments") if isinstance(segment, dict) else None
        if not (isinstance(number, int) and isinstance(total, int) and 1 <= total <= 10
                and 0 <= number < total) or isinstance(number, bool) or isinstance(total, bool):
            raise InvalidInput("Segment needs TotalSegments 1 to 10 and SegmentNumber 0 to "
                               "TotalSegments - 1")
        return number, total

    async def get_unfiltered_table_metadata(self, request: Request) -> Response:
        self._catalog(request, required=True)
        database, name = _string(request, "DatabaseName"), _string(request, "Name")
        supported = _strings(request, "SupportedPermissionTypes", required=True)
        requested = _strings(request, "Permissions") or []
        for member in ("QuerySessionContext", "AuditContext", "SupportedDialect"):
            _structure(request, member)
        for member in ("Region", "ParentResourceArn", "RootResourceArn"):
            _string(request, member, required=False, maximum=2048, minimum=0)
        self.object = (database, name)
        if self.caller.engine not in self.trusted_engines:
            raise AccessDenied(f"{self.caller.engine} is not a trusted engine of this catalog: "
                               "only trusted engines may call GetUnfilteredTableMetadata")
        t = await self._table(database, name)
        found = self._restrictions(t)
        # Lake Formation has no masks: a masked column is left out (fail closed, docs/glue.md)
        authorized = [c for c in self._authorized(t) if c not in found.masks]
        all_columns = len((t.sd.cols if t.sd else None) or ()) + len(t.partitionKeys or ())
        restricted = len(authorized) < all_columns
        if restricted and not any(kind in PERMISSION_TYPES for kind in supported):
            raise PermissionTypeMismatch(
                f"{self.caller.user}'s grants on {database}.{name} are column-level: the engine must "
                f"support one of {', '.join(PERMISSION_TYPES)}")
        if found.row_filter is not None and not any(kind in PERMISSION_TYPES[1:] for kind in supported):
            raise PermissionTypeMismatch(
                f"a row filter (policy {found.row_filter_policy}) applies to {self.caller.user} on "
                f"{database}.{name}: the engine must support one of {', '.join(PERMISSION_TYPES[1:])}")
        permissions = self._permissions(t, authorized)
        missing = [p for p in requested if p not in permissions]
        if missing:
            raise AccessDenied(f"Insufficient Lake Formation permission(s) on {database}.{name}: "
                               f"{', '.join(missing)}")
        out: Response = {
            "Table": shapes.table(t, self.catalog_id, lake_formation=self.policy is not None),
            "AuthorizedColumns": authorized,
            "IsRegisteredWithLakeFormation": self.policy is not None,
            "CellFilters": [{"ColumnName": c, "RowFilterExpression": found.row_filter or "TRUE"}
                            for c in authorized],
            "Permissions": permissions,
        }
        session = request.get("QuerySessionContext") or {}
        if isinstance(session.get("QueryAuthorizationId"), str):
            out["QueryAuthorizationId"] = session["QueryAuthorizationId"]
        return out

    def _permissions(self, t, authorized: list[str]) -> list[str]:
        """The Lake Formation permissions the caller holds on ``t``: SELECT when it may select
        some column, the others from Ranger's table-level accesses; ALL when all of them."""
        if self.policy is None:
            return ["ALL", *LAKE_FORMATION_ACCESS]
        held = [p for p, access in LAKE_FORMATION_ACCESS.items()
                if (p == "SELECT" and authorized) or self.view.may(access, t.dbName, t.tableName)]
        if self.view.may("all", t.dbName, t.tableName):
            held.insert(0, "ALL")
        return held
