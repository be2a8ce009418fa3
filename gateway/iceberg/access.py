"""What each Iceberg REST route needs, declared on its row (:data:`gateway.iceberg.routes.ROUTES`,
``Route.access``), and the one place it is enforced (:func:`enforce`, run by
:func:`gateway.iceberg.routes.answer` before the handler), as the Thrift wing declares each
method's access in ``gateway/thrift/hive_methods.py`` and Iceberg Java's ``RESTCatalogAdapter``
keeps one ``RouteMatch`` row per operation.

A row declares (:class:`Declared`):

* the Ranger access (Hive's ``select``, ``update``, ``create``, ``drop``, ``alter``; ``""``
  for ``_any``, that the object be visible) and the kind of object (namespace, table, view);
* which path parameters name that object;
* for rows whose objects or accesses the body names (commits, transactions, creates, renames,
  registers, the signer), a function of the route, the request and the parsed body that
  returns what is needed (:class:`Need`, one per object);
* the named rules that apply (:class:`Rule`): :data:`DENIED_COLUMNS`,
  :data:`ROW_FILTER_AND_MASKS`, :data:`STORAGE_IDENTITY`, :data:`RESERVED_PROPERTIES` are
  enforced here; :data:`LOCATION_CONFINEMENT` needs state the handler reads (the namespace's
  location and its tables, the metadata file a register names, the base metadata read under
  the commit lock), so its handlers run it (docs/architecture.md names them).

:data:`PUBLIC` rows ask no access (``getConfig``, ``getToken``); a non-public row without a
declaration is refused (500: a gateway bug), and ``tests/unit/test_iceberg_access_rows.py``
fails on it. The same test writes docs/security.md's route table from these rows
(:func:`route_table`).

What the user cannot see is 404 (:meth:`~gateway.iceberg.catalog.Catalog.require`), what the
user sees but may not do 403; an object the request creates is judged by the access alone
(403: its name need not exist nor be visible).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web
from pyiceberg.table.update import AssertCreate, SetPropertiesUpdate

from gateway.iceberg import errors, trusted
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.commit import accesses
from gateway.iceberg.implementations import refuse_reserved
from gateway.iceberg.locations import check_identity
from gateway.iceberg.objects import TABLE, VIEW, CatalogObject, LoadTableResult
from gateway.iceberg.paths import NAMESPACE_SEPARATOR, RouteMatch, hms_name, namespace_name
from gateway.iceberg.signer import ACCESS as SIGNED_ACCESS

__all__ = ["DENIED_COLUMNS", "LOCATION_CONFINEMENT", "PUBLIC", "RESERVED_PROPERTIES", "ROW_FILTER_AND_MASKS",
           "RULES", "STORAGE", "STORAGE_IDENTITY", "Declared", "Need", "Rule", "enforce", "route_table", "state"]


@dataclass(frozen=True)
class Rule:
    """A named rule a row may declare: ``name`` (as docs/security.md names it), what it says
    (``summary``), and whether :func:`enforce` runs it (``before``) or the row's handler does,
    with the state it reads."""

    name: str
    summary: str
    before: bool = True


DENIED_COLUMNS = Rule("denied-columns", "a table with a column denied to the caller: 403 unless a trusted "
                                        "engine asks (gateway.iceberg.trusted.restricted)")
ROW_FILTER_AND_MASKS = Rule("row-filter-and-masks", "a table with a row filter or column mask for the caller: "
                                                    "403 unless a trusted engine asks (trusted.filtered); a load "
                                                    "result answered states the caller's read-restrictions "
                                                    "(trusted.stated)")
STORAGE_IDENTITY = Rule("storage-identity", "the table's metadata file lies below its own location, which lies below its "
                                            "namespace's or inside the allowed locations, over no other table (locations.check_identity)")
RESERVED_PROPERTIES = Rule("reserved-properties", "no property naming code or configuring a storage client "
                                                  "(implementations.refuse_reserved)")
LOCATION_CONFINEMENT = Rule("location-confinement", "every location written, deleted or delegated lies where the "
                                                    "warehouse and the policy allow (gateway.iceberg.locations; "
                                                    "run by the handler)", before=False)
RULES = (DENIED_COLUMNS, ROW_FILTER_AND_MASKS, STORAGE_IDENTITY, RESERVED_PROPERTIES, LOCATION_CONFINEMENT)
#: The rules of every route that reads or hands out an existing table's storage.
STORAGE = (DENIED_COLUMNS, ROW_FILTER_AND_MASKS, STORAGE_IDENTITY)


@dataclass(frozen=True)
class Need:
    """One object a request acts on and what it needs there: ``access`` (None: none asked of
    this object, another need carries it), on ``db`` or its table or view ``name``
    (``object_type``), the ``rules`` that apply to it, and for :data:`RESERVED_PROPERTIES` the
    property ``keys`` the body sets. ``existing`` False: an object the request creates, judged
    by the access alone (403, never 404) and never read."""

    access: str | None
    db: str
    name: str | None = None
    object_type: CatalogObject = TABLE
    rules: tuple[Rule, ...] = ()
    keys: tuple[str, ...] = ()
    existing: bool = True

    @property
    def subject(self) -> str:
        what = "namespace" if self.name is None else self.object_type.noun
        return f"{what} {self.db}" + ("" if self.name is None else f".{self.name}")


#: ``(route, request, body read as the row's request model) -> the needs``; raises
#: :class:`~gateway.iceberg.errors.IcebergError` for names the Hive Metastore refuses.
NeedsOf = Callable[[RouteMatch, web.BaseRequest, Any], Iterable[Need]]


@dataclass(frozen=True)
class Declared:
    """What a row declares: the ``access`` on the ``on`` object (``namespace``, ``table``,
    ``view``) the ``path`` parameters name, the ``rules`` that apply; or, for rows the body
    decides, ``body``, with ``access`` then saying in words what it returns (for the docs).
    ``public``: no access asked (:data:`PUBLIC`)."""

    access: str = ""
    on: str = ""
    path: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    body: NeedsOf | None = None
    public: bool = False

    def needs(self, route: RouteMatch, request: web.BaseRequest, ask: Any) -> list[Need]:
        """What a request on this row needs. Raises what ``body`` raises."""
        if self.public:
            return []
        if self.body is not None:
            return list(self.body(route, request, ask))
        object_type = VIEW if self.on == "view" else TABLE
        return [Need(self.access, route.db(), route.table if self.on != "namespace" else None, object_type,
                     self.rules)]


#: A row that asks no access.
PUBLIC = Declared(public=True)


def on_namespace(access: str, *rules: Rule) -> Declared:
    """``access`` on the namespace the path's ``{namespace}`` names."""
    return Declared(access, "namespace", ("namespace",), rules)


def on_table(access: str, *rules: Rule) -> Declared:
    """``access`` on the table the path's ``{namespace}`` and ``{table}`` name."""
    return Declared(access, "table", ("namespace", "table"), rules)


def on_view(access: str, *rules: Rule) -> Declared:
    """``access`` on the view the path's ``{namespace}`` and ``{view}`` name."""
    return Declared(access, "view", ("namespace", "view"), rules)


def by_body(says: str, on: str, path: tuple[str, ...], needs: NeedsOf, *rules: Rule) -> Declared:
    """A row whose needs the body decides (``needs``); ``says`` them in words, ``rules`` lists
    every rule some need of it carries."""
    return Declared(says, on, path, rules, needs)


async def enforce(catalog: Catalog, declared: Declared | None, route: RouteMatch, request: web.BaseRequest,
                  ask: Any) -> list[Need]:
    """Judge a request on a row before its handler runs; its needs (for :func:`state`). Raises
    the 404 of an object the caller cannot see, :class:`~errors.Forbidden` (403: an access or a
    rule), what reading a judged table raises (404 for a table that is not Iceberg),
    :class:`~errors.BadRequest` (names, reserved properties); ``TypeError`` (answered 500) for a
    row that declares nothing."""
    if declared is None:
        raise TypeError(f"{route.operation} declares no access")
    needs = declared.needs(route, request, ask)
    for need in needs:  # the body alone: refused before anything is asked of the policy
        if RESERVED_PROPERTIES in need.rules:
            refuse_reserved(need.keys, need.subject)
    for need in needs:  # the policy, before HMS is asked whether anything exists
        catalog.named(need.db, need.name)
        if need.access is not None:
            catalog.require(need.access, need.db, need.name, need.object_type, seen=need.existing)
    for need in needs:
        if need.name is not None:
            await _rules(catalog, need)
    return needs


async def state(catalog: Catalog, needs: Iterable[Need], reply: Reply, *, written: bool) -> Reply:
    """``reply`` with the caller's read restrictions stated in its body when it is a load result
    of a table whose need carries :data:`ROW_FILTER_AND_MASKS` (load, create, register, commit:
    :func:`gateway.iceberg.trusted.stated`, ``written`` for the answer of a change). Raises
    :class:`~errors.Forbidden` as that does."""
    if not isinstance(reply.body, LoadTableResult):
        return reply
    for need in needs:
        if ROW_FILTER_AND_MASKS in need.rules and need.name is not None and need.object_type is TABLE:
            hive = await catalog.judged(need.db, need.name) if need.existing else None
            body = trusted.stated(catalog, need.db, need.name, reply.body, hive, written=written)
            return reply if body is reply.body else replace(reply, body=body)
    return reply


async def _rules(catalog: Catalog, need: Need) -> None:
    """The rules of ``need`` (a table or view) that :func:`enforce` runs."""
    rules, db, name = need.rules, need.db, need.name
    assert name is not None
    if DENIED_COLUMNS in rules:
        trusted.restricted(catalog, db, name)
    hive = None
    if need.existing and (ROW_FILTER_AND_MASKS in rules or STORAGE_IDENTITY in rules):
        hive = await catalog.judged(db, name, need.object_type)
    if ROW_FILTER_AND_MASKS in rules:
        trusted.filtered(catalog, db, name, hive)
        if hive is not None:  # what a load could not state is handed out by no route
            await trusted.statable(catalog, db, name, hive)
    if STORAGE_IDENTITY in rules and hive is not None:
        await check_identity(catalog, db, name, hive)


# --- rows the body decides -------------------------------------------------------------------

def create_namespace(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
    """``create`` on the namespace the body names (403 only: it need not exist)."""
    return [Need("create", namespace_name(ask.namespace), keys=tuple(ask.properties),
                 rules=(RESERVED_PROPERTIES,), existing=False)]


def update_namespace(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
    """``alter`` on the path's namespace, the updated keys not reserved."""
    return [Need("alter", route.db(), keys=tuple(ask.updates), rules=(RESERVED_PROPERTIES,))]


def list_namespaces(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
    """A ``parent`` (query) must be visible; the listing shows only the visible namespaces."""
    parent = request.query.get("parent")
    if parent is None:
        return []
    return [Need("", namespace_name(parent.split(NAMESPACE_SEPARATOR), errors.NoSuchNamespace))]


def _created(object_type: CatalogObject, *rules: Rule, properties: bool = True):
    def needs(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
        db, name = route.db(), hms_name(ask.name, object_type.noun)
        keys = tuple(ask.properties) if properties else ()
        reserved = (RESERVED_PROPERTIES,) if properties else ()
        return [Need("create", db), Need(None, db, name, object_type, (*rules, *reserved), keys, existing=False)]
    return needs


create_table = _created(TABLE, ROW_FILTER_AND_MASKS)
create_view = _created(VIEW)
register_table = _created(TABLE, ROW_FILTER_AND_MASKS, properties=False)
register_view = _created(VIEW, properties=False)


def _set_keys(updates) -> tuple[str, ...]:
    return tuple(key for u in updates if isinstance(u, SetPropertiesUpdate) for key in u.updates)


def commit_table(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
    """A staged create (``assert-create``): ``create`` on the namespace. Else ``update`` (data
    updates) and/or ``alter`` (the others) on the table, with the storage rules."""
    db, name = route.db_table()
    if any(isinstance(r, AssertCreate) for r in ask.requirements):
        return [Need("create", db), Need(None, db, name, TABLE, (ROW_FILTER_AND_MASKS, RESERVED_PROPERTIES),
                                         _set_keys(ask.updates), existing=False)]
    return _table_commit(db, name, ask.updates)


def _table_commit(db: str, name: str, updates) -> list[Need]:
    needed = accesses(updates)
    return [Need(needed[0], db, name, TABLE, (*STORAGE, RESERVED_PROPERTIES), _set_keys(updates)),
            *(Need(access, db, name) for access in needed[1:])]


def commit_transaction(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
    """Each change as a table commit."""
    return [need for change in ask.changes for need in _table_commit(change.db, change.name, change.request.updates)]


def replace_view(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
    db, name = route.db_table()
    return [Need("alter", db, name, VIEW, (RESERVED_PROPERTIES,), _set_keys(ask.updates))]


def _renamed(object_type: CatalogObject):
    def needs(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
        src_db, src = namespace_name(ask.source.namespace), hms_name(ask.source.name, object_type.noun)
        dst_db = namespace_name(ask.destination.namespace)
        hms_name(ask.destination.name, object_type.noun)
        return [Need("alter", src_db, src, object_type), Need("create", dst_db)]
    return needs


rename_table = _renamed(TABLE)
rename_view = _renamed(VIEW)


def sign(route: RouteMatch, request: web.BaseRequest, ask) -> list[Need]:
    """``select`` for GET and HEAD, ``update`` for PUT, POST and DELETE on the path's table
    (:data:`gateway.iceberg.signer.ACCESS`), with the storage rules; any other method is
    never signed (403)."""
    access = SIGNED_ACCESS.get(ask.method.upper())
    if access is None:
        raise errors.Forbidden(f"S3 method {ask.method[:16]!r} is never signed")
    db, name = route.db_table()
    return [Need(access, db, name, TABLE, STORAGE)]


# --- the docs' table ------------------------------------------------------------------------------

def route_table(rows) -> str:
    """docs/security.md's table of every route's access (Markdown), from ``rows`` (the route
    table's :class:`~gateway.iceberg.routes.Route` rows)."""
    lines = ["| Operation | Method and path | Access | Object (path parameters) | Rules |",
             "|---|---|---|---|---|"]
    for row in rows:
        declared = row.access
        if declared is None or declared.public:
            access, on, rules = "public", "none", ""
        else:
            access = f"`{declared.access}`" if declared.body is None and declared.access else (
                "visible (`_any`)" if declared.body is None else declared.access)
            on = declared.on or "catalog"
            if declared.path:
                on += " (" + ", ".join(f"`{{{p}}}`" for p in declared.path) + ")"
            elif declared.body is not None and on != "catalog":
                on += " (the body)"
            rules = ", ".join(rule.name for rule in declared.rules)
        lines.append(f"| `{row.operation}` | `{row.method} {row.path}` | {access} | {on} | {rules} |")
    return "\n".join(lines) + "\n"
